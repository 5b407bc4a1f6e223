"""Rolling a policy change out to a running deployment without a redeploy (``osprey policy diff`` / ``apply``).

The deployment reads its policies from SSM, one parameter per policy (:mod:`osprey_control.policy.stored`), and
the derive step re-reads them within a minute (:data:`osprey_control.policy_store.DEFAULT_MAX_AGE_SECONDS`),
so writing the parameter *is* the roll-out: the next cycles derive under the new policy, and the damping
(``maxPriorityChange``) moves every job towards its new priority gradually, as with any change of input.

:func:`plan_rollout` compares policy files with what is deployed; :func:`apply_rollout` writes the changed ones.
Policies not named in the files are left alone. All files are validated, and every custom rule checked against
the deployment, before anything is written; if a write fails, the policies already written are put back (or
deleted, when they were new), so a roll-out is never half-applied.

A policy written here and not committed to ``policies/`` stays in force until the CDK app next changes that
parameter: commit the file too (docs/policies.md, Rolling out a change).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from osprey_control.policy import (
    LoadedPolicy,
    json_nesting_error,
    parameter_name,
    parameter_tier,
    policy_parameter_value,
)

__all__ = ["PolicyChange", "RolloutError", "apply_rollout", "deployed_policies", "plan_rollout"]

ChangeKind = Literal["new", "changed", "unchanged"]


class RolloutError(RuntimeError):
    """A write failed; the message says what was put back."""


@dataclass(frozen=True)
class PolicyChange:
    name: str
    kind: ChangeKind
    source: str  # the file the new version comes from
    parameter: str
    old_value: str | None
    new_value: str

    def diff(self) -> list[str]:
        """A unified diff of the two versions as YAML (every default filled in, keys sorted)."""
        return list(
            difflib.unified_diff(
                _as_yaml(self.old_value),
                _as_yaml(self.new_value),
                fromfile=f"deployed {self.parameter}" if self.old_value is not None else "/dev/null",
                tofile=self.source,
                lineterm="",
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "change": self.kind, "source": self.source, "parameter": self.parameter}


def _decoded(value: str) -> tuple[bool, Any]:
    """``(True, document)``, or ``(False, None)`` for a value that is not JSON or nests too deep to decode
    safely (a hand-edited or broken parameter, which a roll-out must still be able to replace)."""
    if json_nesting_error(value) is not None:
        return False, None
    try:
        return True, json.loads(value)
    except ValueError:
        return False, None


def _as_yaml(value: str | None) -> list[str]:
    if value is None:
        return []
    decoded, document = _decoded(value)
    if not decoded:  # compare it as it is
        return value.splitlines()
    return str(yaml.safe_dump(document, sort_keys=True, default_flow_style=False)).splitlines()


def deployed_policies(ssm: Any, prefix: str) -> dict[str, str]:
    """The stored value of every policy under ``prefix``, by policy name (GetParametersByPath, paginated)."""
    found: dict[str, str] = {}
    for page in ssm.get_paginator("get_parameters_by_path").paginate(
        Path=prefix.rstrip("/"), Recursive=False
    ):
        for parameter in page.get("Parameters", ()):
            found[str(parameter["Name"]).rsplit("/", 1)[-1]] = str(parameter["Value"])
    return found


def plan_rollout(
    policies: Sequence[LoadedPolicy], deployed: dict[str, str], prefix: str
) -> list[PolicyChange]:
    """What writing ``policies`` would change, one entry per policy in the files (ValueError naming the file if
    a policy is too large for SSM)."""
    changes: list[PolicyChange] = []
    for loaded in policies:
        name = loaded.policy.name
        value = policy_parameter_value(loaded.policy)
        try:
            parameter_tier(value)
        except ValueError as error:
            raise ValueError(f"{loaded.source}: (document): {error}") from None
        old = deployed.get(name)
        kind: ChangeKind = "new" if old is None else "unchanged" if _same(old, value) else "changed"
        changes.append(PolicyChange(name, kind, str(loaded.source), parameter_name(prefix, name), old, value))
    return changes


def _same(old: str, new: str) -> bool:
    (old_ok, old_document), (new_ok, new_document) = _decoded(old), _decoded(new)
    if old_ok and new_ok:
        return bool(old_document == new_document)
    return old == new


def _write(ssm: Any, change: PolicyChange, value: str) -> None:
    ssm.put_parameter(
        Name=change.parameter,
        Value=value,
        Type="String",
        Overwrite=True,
        Tier=parameter_tier(value),
        Description=f"Osprey PriorityDerivationPolicy {change.name} (osprey policy apply)",
    )


def apply_rollout(ssm: Any, changes: Sequence[PolicyChange]) -> list[PolicyChange]:
    """Write every new or changed policy; returns those written. On a failed write, the ones already written are
    restored and :class:`RolloutError` says so (its cause is the AWS error)."""
    written: list[PolicyChange] = []
    for change in changes:
        if change.kind == "unchanged":
            continue
        try:
            _write(ssm, change, change.new_value)
        except Exception as error:
            restored = _restore(ssm, written)
            raise RolloutError(
                f"{change.parameter}: not written ({type(error).__name__}: {error}); {restored}"
            ) from error
        written.append(change)
    return written


def _restore(ssm: Any, written: Sequence[PolicyChange]) -> str:
    if not written:
        return "nothing had been written"
    failed: list[str] = []
    for change in reversed(written):
        try:
            if change.old_value is None:
                ssm.delete_parameter(Name=change.parameter)
            else:
                _write(ssm, change, change.old_value)
        except Exception:
            failed.append(change.parameter)
    if failed:
        return f"put back all but {', '.join(failed)}, which now hold the new version"
    return f"put back {', '.join(change.parameter for change in written)}"
