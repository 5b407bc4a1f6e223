"""The ``osprey`` block of docs/design.md §5 as a pydantic v2 model, and the one function that validates it.

The block is what a job says about itself: which policy derives its priority, whether it is a gang and
for how long Osprey waits for it, and optionally where it is queued. Fields left unset (``None``) are not
emitted as environment variables or tags, so the policy's own value applies (``coScheduling.enabled``,
``gangTimeoutSeconds``, ``requiredMinWorkers``, ``initialPriority``).

Ranges agree with the policy model (``osprey_control.policy.model``): ``gang_timeout`` 1..86400 seconds,
``required_min_workers`` a percent 1..100, ``initial_priority`` an integer 0..100, the policy name a
DNS-1123 label. ``expected_runtime`` (docs/design.md §5: the user's estimate of the job's run time, the
``remaining_time`` budget before the runtime reports progress) is 1..2592000 seconds: 30 days, beyond any
training job limit SageMaker (28 days) allows, so a larger value is a unit mistake (milliseconds?).

Validation is strict: ``gang_timeout="120"`` or ``co_schedule="yes"`` is an error, never converted. The
string forms (environment, tags, Kubernetes) are converted by :mod:`osprey_control.contract.forms` before
they reach this model.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

__all__ = [
    "BATCH_PRIORITY_MAX",
    "BLOCK_KEYS",
    "EXPECTED_RUNTIME_MAX",
    "OspreyBlock",
    "OspreyBlockError",
    "batch_scheduling_priority",
    "parse_block",
]

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
# A Batch job queue name (up to 128 letters, digits, '-' and '_') or its ARN.
JOB_QUEUE_PATTERN = (
    r"^([A-Za-z0-9][A-Za-z0-9_-]{0,127}"
    r"|arn:aws(-[a-z]+)*:batch:[a-z]{2}(-[a-z]+)+-\d:\d{12}:job-queue/[A-Za-z0-9][A-Za-z0-9_-]{0,127})$"
)
# Batch documents "up to 255 alphanumeric characters"; its own examples use '-' (UserA-1) and '_'. The
# trailing '*' is only meaningful in a scheduling policy, never on a job, so it is rejected here.
SHARE_IDENTIFIER_PATTERN = r"^[A-Za-z0-9_-]{1,255}$"
BATCH_PRIORITY_MAX = 9999
EXPECTED_RUNTIME_MAX = 30 * 86400

_Seconds = Annotated[int, Field(ge=1, le=86400)]
_Percent = Annotated[int, Field(ge=1, le=100)]
_Priority = Annotated[int, Field(ge=0, le=100)]
_Runtime = Annotated[int, Field(ge=1, le=EXPECTED_RUNTIME_MAX)]

FIELD_ALLOWED: dict[str, str] = {
    "co_schedule": "true or false",
    "gang_timeout": "an integer number of seconds 1..86400",
    "priority_derivation_profile": "a policy name: a DNS-1123 label (lowercase letters, digits and '-', "
    "starting and ending with a letter or digit, at most 63 characters)",
    "required_min_workers": "an integer percent of the workers 1..100",
    "initial_priority": "an integer 0..100",
    "queue": "the name (letters, digits, '-', '_', at most 128) or ARN of an AWS Batch job queue",
    "share_identifier": "a fair-share identifier: letters, digits, '-' and '_', at most 255 characters",
    "expected_runtime": f"an integer number of seconds 1..{EXPECTED_RUNTIME_MAX} (30 days)",
}


class OspreyBlock(BaseModel):
    """One job's Osprey settings (docs/design.md §5). Construct it with :func:`parse_block` for friendly errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    priority_derivation_profile: Annotated[StrictStr, Field(pattern=DNS1123_LABEL, max_length=63)]
    co_schedule: StrictBool | None = None
    gang_timeout: _Seconds | None = None
    required_min_workers: _Percent | None = None
    initial_priority: _Priority | None = None
    queue: Annotated[StrictStr, Field(pattern=JOB_QUEUE_PATTERN)] | None = None
    share_identifier: Annotated[StrictStr, Field(pattern=SHARE_IDENTIFIER_PATTERN)] | None = None
    expected_runtime: _Runtime | None = None

    @property
    def policy(self) -> str:
        """The policy name (``priority_derivation_profile``)."""
        return self.priority_derivation_profile

    def as_kwargs(self) -> dict[str, Any]:
        """The fields that are set, as the keyword arguments that would rebuild this block."""
        return self.model_dump(exclude_none=True)


BLOCK_KEYS: tuple[str, ...] = tuple(OspreyBlock.model_fields)


def batch_scheduling_priority(priority: int) -> int:
    """Map an Osprey priority 0..100 linearly onto AWS Batch's 0..9999, rounding half up."""
    if not 0 <= priority <= 100:
        raise ValueError(f"priority must be an integer 0..100, got {priority}")
    return (priority * BATCH_PRIORITY_MAX * 2 + 100) // 200


def _normalise(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "").replace(":", "").replace("/", "")


def closest(unknown: str, allowed: list[str] | tuple[str, ...]) -> str | None:
    """The allowed key closest to ``unknown``, comparing case- and separator-insensitively."""
    by_normal = {_normalise(key): key for key in allowed}
    hit = difflib.get_close_matches(_normalise(unknown), list(by_normal), n=1, cutoff=0.6)
    return by_normal[hit[0]] if hit else None


class OspreyBlockError(ValueError):
    """An invalid ``osprey`` block, environment, tag set or manifest: one ``(key, message)`` per problem.

    ``str(error)`` lists every problem on its own line, each naming the key as the user wrote it
    (``distribution.torch_distributed.osprey.gang_timeout``, ``OSPREY_GANG_TIMEOUT``, ``osprey:policy``).
    """

    def __init__(self, problems: list[tuple[str, str]], *, source: str = "osprey block") -> None:
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        self.source = source
        lines = [f"{key}: {message}" if key else message for key, message in problems]
        super().__init__(f"invalid {source}:\n  " + "\n  ".join(lines))


def _shown(value: Any) -> str:
    text = repr(value)
    return f" (got {text[:57] + '...' if len(text) > 60 else text})"


def describe_validation_error(
    error: ValidationError,
    key_for: Callable[[str], str],
    *,
    given: Mapping[str, Any] | None = None,
    name_for: Callable[[str], str] | None = None,
) -> list[tuple[str, str]]:
    """``(key, message)`` for each pydantic error.

    ``key_for`` maps a field name to the key as the user wrote it (the problem's location); ``name_for``
    (default: ``key_for``) spells the suggested and allowed keys.
    """
    spell = name_for or key_for
    problems: list[tuple[str, str]] = []
    for detail in error.errors():
        field = str(detail["loc"][0]) if detail["loc"] else ""
        kind = detail["type"]
        if kind == "extra_forbidden":
            hint = closest(field, BLOCK_KEYS)
            suggestion = f"; did you mean '{spell(hint)}'?" if hint else ""
            allowed = ", ".join(spell(name) for name in BLOCK_KEYS)
            problems.append((key_for(field), f"unknown key{suggestion}; allowed keys: {allowed}"))
            continue
        allowed = FIELD_ALLOWED.get(field, "")
        if kind == "missing":
            problems.append((key_for(field), f"required key is missing; expected {allowed}"))
            continue
        message = "invalid value" if kind == "string_pattern_mismatch" else detail["msg"]
        value = given.get(field, detail.get("input")) if given is not None else detail.get("input")
        problems.append((key_for(field), f"{message}{_shown(value)}; allowed: {allowed}"))
    return problems


def parse_block(value: Any, *, path: str = "osprey") -> OspreyBlock:
    """Validate a Python ``osprey`` block (a mapping of the keys of :class:`OspreyBlock`).

    Raises :class:`OspreyBlockError` naming ``<path>.<key>`` and what is allowed; unknown keys get the
    closest valid key as a suggestion.
    """
    if isinstance(value, OspreyBlock):
        return value
    if not isinstance(value, Mapping):
        raise OspreyBlockError(
            [(path, f"must be a mapping of {', '.join(BLOCK_KEYS)}{_shown(value)}")], source="osprey block"
        )
    bad_keys = [key for key in value if not isinstance(key, str)]
    if bad_keys:
        raise OspreyBlockError([(path, f"keys must be strings{_shown(bad_keys[0])}")])
    try:
        return OspreyBlock.model_validate(dict(value))
    except ValidationError as error:
        problems = describe_validation_error(error, lambda name: f"{path}.{name}", name_for=str)
        raise OspreyBlockError(problems) from None
