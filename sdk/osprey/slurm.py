"""``osprey.slurm``: put the ``osprey`` block on a Slurm batch script or a slurmrestd submission.

The control plane finds Slurm jobs by the marker in their ``comment`` (slurmrestd does not show a job's
environment; :mod:`osprey_control.backends.slurm.marker`), and the job itself reads the ``OSPREY_*`` environment
(``osprey.runtime``, ``osprey.adjust_parallelism``). Both are written from one block, so they always agree.

**A batch script** (:func:`annotate_script`, ``osprey slurm annotate``): the block is the script's own
``OSPREY_*`` values (``export OSPREY_X=...`` or ``OSPREY_X=...`` lines, and ``#SBATCH --export=...``) plus the
options you pass; an option that contradicts the script is an error naming both. Variables that are not part
of the block (``OSPREY_INTERVAL``, ``OSPREY_LOG``, ``OSPREY_PLAN_FILE``, the runtime's own) are left as they
are. A script without ``OSPREY_PRIORITY_POLICY`` and without ``policy=`` gets ``default-policy`` (the shipped
policy meant for queues), and the result says so. What is added, right after the ``#SBATCH`` header:

- ``#SBATCH --comment=<marker>`` (an existing comment keeps its own text; old Osprey tokens are replaced);
- ``export`` lines for the block's variables the script does not set yet, and
  ``export OSPREY_JOB_ID="${SLURM_CLUSTER_NAME}/${SLURM_JOB_ID}"`` (the registry's id of the job, so the
  runtime's metrics name it) unless the script sets one.

Annotating an annotated script changes nothing. A script with ``OSPREY_ENABLED=0`` is an error.

**A REST submission** (:func:`annotate_submission`): the ``job`` object of ``POST /slurm/v0.0.38/job/submit``
gets the marker in ``comment`` and the block's variables in ``environment`` (an object in v0.0.38, a list of
``NAME=value`` strings in later versions; both are kept in their form). slurmrestd refuses a submission
without ``environment`` or ``current_working_directory``; a missing ``current_working_directory`` is reported
here, before any call.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from osprey_control.backends.slurm import comment_with_marker
from osprey_control.contract import (
    ENABLED_ENV,
    ENVIRONMENT,
    OptInState,
    OspreyBlock,
    OspreyBlockError,
    merge_block,
    opt_in,
    parse_block,
    to_environment,
)
from osprey_control.wiring import RUNTIME_JOB_ID_VARIABLE

__all__ = [
    "DEFAULT_POLICY",
    "AnnotatedScript",
    "annotate_script",
    "annotate_submission",
    "script_environment",
]

DEFAULT_POLICY = "default-policy"
_JOB_ID_LINE = f'export {RUNTIME_JOB_ID_VARIABLE}="${{SLURM_CLUSTER_NAME}}/${{SLURM_JOB_ID}}"'
_ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?(OSPREY_[A-Z0-9_]+)=(.*?)\s*(?:#.*)?$")
_SBATCH = re.compile(r"^#SBATCH\s+(.*)$")
_CONTRACT_KEYS = frozenset(ENVIRONMENT.keys)


@dataclass(frozen=True)
class AnnotatedScript:
    text: str
    block: OspreyBlock
    notes: list[str] = field(default_factory=list)  # what was decided for you (a default policy)


def _unquote(value: str) -> str:
    try:
        parts = shlex.split(value)
    except ValueError:
        return value
    return parts[0] if len(parts) == 1 else value


def _sbatch_options(line: str) -> list[str]:
    match = _SBATCH.match(line)
    if not match:
        return []
    try:
        return shlex.split(match.group(1), comments=True)
    except ValueError:
        return match.group(1).split()


def script_environment(text: str) -> dict[str, str]:
    """Every ``OSPREY_*`` value a batch script sets: ``#SBATCH --export=`` entries, then ``OSPREY_X=...``
    assignments in the script (a later assignment wins, as in the shell)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        for option in _sbatch_options(line):
            if option.startswith("--export="):
                for item in option.removeprefix("--export=").split(","):
                    name, separator, value = item.partition("=")
                    if separator and name.startswith("OSPREY_"):
                        values[name] = value
        match = _ASSIGNMENT.match(line)
        if match and not line.lstrip().startswith("#"):
            values[match.group(1)] = _unquote(match.group(2))
    return values


def _header_end(lines: list[str]) -> int:
    """Index after the shebang, leading comments/blank lines and every ``#SBATCH`` line (sbatch stops reading
    directives at the first command)."""
    end = 0
    for index, line in enumerate(lines):
        stripped = line.strip()
        if index == 0 and stripped.startswith("#!"):
            end = 1
        elif stripped.startswith("#SBATCH"):
            end = index + 1
        elif stripped and not stripped.startswith("#"):
            break
    return end


def _effective_block(given: dict[str, Any], contract: dict[str, str], notes: list[str]) -> OspreyBlock:
    policy_key = ENVIRONMENT.key("priority_derivation_profile")
    if "priority_derivation_profile" not in given:
        if policy_key in contract:
            given["priority_derivation_profile"] = contract[policy_key]  # merge_block still validates it
        else:
            given["priority_derivation_profile"] = DEFAULT_POLICY
            notes.append(f"no {policy_key} in the script and no policy given: using {DEFAULT_POLICY}")
    return merge_block(parse_block(given), (ENVIRONMENT, contract, "script"))


def _without_comment(lines: list[str], end: int) -> tuple[list[str], str]:
    """The lines with every ``--comment=`` of the header removed, and the last comment's text."""
    comment = ""
    kept: list[str] = []
    for index, line in enumerate(lines):
        options = _sbatch_options(line) if index < end else []
        comments = [option for option in options if option.startswith("--comment=")]
        if not comments:
            kept.append(line)
            continue
        comment = comments[-1].removeprefix("--comment=")
        others = [option for option in options if option not in comments]
        if others:  # the line's other options stay; the comment is written once, below
            kept.append("#SBATCH " + " ".join(shlex.quote(option) for option in others))
    return kept, comment


def annotate_script(text: str, osprey: OspreyBlock | Mapping[str, Any] | None = None) -> AnnotatedScript:
    """``text`` with the Osprey marker and environment (module docstring); OspreyBlockError names any
    invalid or contradicting value."""
    given = dict(osprey.as_kwargs() if isinstance(osprey, OspreyBlock) else (osprey or {}))
    environment = script_environment(text)
    enabled = opt_in(ENABLED_ENV, environment.get(ENABLED_ENV))  # the one definition of opt-in
    if enabled.state is OptInState.OUT:
        raise OspreyBlockError(
            [(ENABLED_ENV, f"the script sets {ENABLED_ENV}=0 (opted out); remove it to annotate")]
        )
    if enabled.state is OptInState.INVALID:
        raise OspreyBlockError([(ENABLED_ENV, enabled.reason)])
    contract = {key: value for key, value in environment.items() if key in _CONTRACT_KEYS}
    notes: list[str] = []
    block = _effective_block(given, contract, notes)
    lines = text.splitlines()
    kept, comment = _without_comment(lines, _header_end(lines))
    end = _header_end(kept)
    added = [f"#SBATCH --comment={shlex.quote(comment_with_marker(comment, block))}"]
    added += [
        f"export {name}={shlex.quote(value)}"
        for name, value in to_environment(block).items()
        if name not in environment
    ]
    if RUNTIME_JOB_ID_VARIABLE not in environment:
        added.append(_JOB_ID_LINE)
    body = kept[:end] + added + kept[end:]
    return AnnotatedScript("\n".join(body) + ("\n" if text.endswith("\n") or not text else ""), block, notes)


def annotate_submission(job: Mapping[str, Any], osprey: OspreyBlock | Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a slurmrestd ``job`` object with the marker and the ``OSPREY_*`` environment (module docs)."""
    if not isinstance(job, Mapping):
        raise OspreyBlockError(
            [("job", f"must be the submission's job object (a mapping), got {type(job).__name__}")]
        )
    block = osprey if isinstance(osprey, OspreyBlock) else parse_block(dict(osprey))
    result = copy.deepcopy(dict(job))
    if not result.get("current_working_directory"):
        raise OspreyBlockError(
            [
                (
                    "job.current_working_directory",
                    "required by slurmrestd to submit a job: the job's working directory",
                )
            ]
        )
    existing = result.get("environment")
    if existing is None:
        existing = {}
    if isinstance(existing, Mapping):
        current = {str(key): str(value) for key, value in existing.items()}
    elif isinstance(existing, list):
        current = dict(str(item).partition("=")[::2] for item in existing)
    else:
        raise OspreyBlockError(
            [("job.environment", "must be an object (v0.0.38) or a list of NAME=value strings")]
        )
    contract = {key: value for key, value in current.items() if key in _CONTRACT_KEYS}
    effective = merge_block(block, (ENVIRONMENT, contract, "job.environment"))
    variables = to_environment(effective)
    if isinstance(existing, list):
        result["environment"] = [
            item for item in existing if str(item).partition("=")[0] not in variables
        ] + [f"{name}={value}" for name, value in variables.items()]
    else:
        result["environment"] = {**current, **variables}
    result["comment"] = comment_with_marker(str(result.get("comment") or ""), effective)
    return result
