"""What the cycle's steps report about the deployed policies: the ones whose stored value is refused
(:class:`~osprey_control.policy.InvalidPolicy`), in the step's output, its metrics and its log.

The collect step and every derive shard report them, so an invalid policy is seen in each cycle even when a
step runs without the other: ``InvalidPolicies`` (no dimension) is their number, published every run with 0
included so its alarm has data; one more point per invalid policy carries the ``Policy`` dimension to say
which. The alarm reads the total's Maximum, which every step reports alike (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from osprey_control.errors import ERROR_CHARS, FAILURE_SAMPLE
from osprey_control.policy import InvalidPolicy
from osprey_control.telemetry import MetricPoint
from osprey_control.wiring import INVALID_POLICIES_METRIC, POLICY_DIMENSION

__all__ = ["ReportsInvalidPolicies", "invalid_policies", "invalid_policy_metrics", "invalid_policy_output"]


@runtime_checkable
class ReportsInvalidPolicies(Protocol):
    """A policy lookup that knows which deployed policies are invalid (``osprey_control.policy_store.PolicySource``)."""

    def invalid_policies(self) -> Mapping[str, InvalidPolicy]: ...


def invalid_policies(policies: object) -> dict[str, InvalidPolicy]:
    """The invalid policies ``policies`` knows of, by name; none for a lookup that cannot say (a test's dict)."""
    if isinstance(policies, ReportsInvalidPolicies):
        return dict(sorted(policies.invalid_policies().items()))
    return {}


def invalid_policy_metrics(invalid: Mapping[str, InvalidPolicy]) -> list[MetricPoint]:
    total = MetricPoint(INVALID_POLICIES_METRIC, "Count", (float(len(invalid)),))
    return [
        total,
        *(
            MetricPoint(INVALID_POLICIES_METRIC, "Count", (1.0,), {POLICY_DIMENSION: name})
            for name in sorted(invalid)
        ),
    ]


def invalid_policy_output(invalid: Mapping[str, InvalidPolicy], *, detailed: bool = True) -> dict[str, Any]:
    """The step output's keys, only when there are invalid policies (a clean run's output is unchanged):
    ``invalidPolicyCount`` and, when ``detailed``, ``invalidPolicies`` (name → what is wrong and what its jobs
    get, at most FAILURE_SAMPLE of them, each cut to ERROR_CHARS). The collect step, once per cycle, gives the
    details; each derive shard only the count, so the Map's result does not grow by 1.7 KB per shard
    (docs/control-plane.md, Payload)."""
    if not invalid:
        return {}
    if not detailed:
        return {"invalidPolicyCount": len(invalid)}
    shown = sorted(invalid)[:FAILURE_SAMPLE]
    return {
        "invalidPolicies": {name: invalid[name].describe()[:ERROR_CHARS] for name in shown},
        "invalidPolicyCount": len(invalid),
    }
