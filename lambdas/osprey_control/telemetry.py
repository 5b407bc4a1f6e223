"""What a derive step publishes (DESIGN §8), as plain data points; handlers emit them as EMF.

Pure: building the points needs no AWS and no Powertools, so the simulator and tests use the same code.
Per-job dimensions multiply CloudWatch cost by the fleet size, so they are off unless asked for.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Only for the annotation: importing the derive package at run time would pull Powertools Parameters and
    # boto3 into every handler that publishes a metric point (apply, finish), ~0.2 s of cold start.
    from osprey_control.derive.shard import ShardResult

__all__ = ["MetricPoint", "shard_metrics"]


@dataclass(frozen=True)
class MetricPoint:
    """One metric for one set of dimensions; several values make one EMF record with a value array."""

    name: str
    unit: str  # a CloudWatch unit name: Count, None, Milliseconds, Seconds
    values: tuple[float, ...]
    dimensions: dict[str, str] = field(default_factory=dict)


def shard_metrics(result: ShardResult, *, per_job: bool = False) -> list[MetricPoint]:
    """DerivedPriority and PriorityChange per policy (and per job when ``per_job``), JobsEvaluated,
    CustomRuleFailures by reason, MetricsMissing (rules skipped for lack of data), DerivationErrors by kind."""
    priorities: dict[str, list[float]] = defaultdict(list)
    changes: dict[str, list[float]] = defaultdict(list)
    points: list[MetricPoint] = []
    missing = 0
    errors: Counter[str] = Counter()
    for outcome in result.outcomes:
        if outcome.error_kind is not None:
            errors[outcome.error_kind] += 1
        decision = outcome.decision
        if decision is None:
            continue
        policy = outcome.record.policy
        change = float(decision.priority - decision.previous)
        priorities[policy].append(float(decision.priority))
        changes[policy].append(change)
        missing += sum(1 for rule in decision.rules if rule.outcome in ("no-data", "invalid-data"))
        if per_job:
            job = {"Policy": policy, "JobId": str(outcome.record.key)}
            points.append(MetricPoint("DerivedPriority", "None", (float(decision.priority),), job))
            points.append(MetricPoint("PriorityChange", "None", (change,), job))
    for policy in sorted(priorities):
        points.append(MetricPoint("DerivedPriority", "None", tuple(priorities[policy]), {"Policy": policy}))
        points.append(MetricPoint("PriorityChange", "None", tuple(changes[policy]), {"Policy": policy}))
    points.append(MetricPoint("JobsEvaluated", "Count", (float(len(result.outcomes)),)))
    points.append(MetricPoint("MetricsMissing", "Count", (float(missing),)))
    for reason, count in sorted(result.custom_rule_failures.items()):
        points.append(MetricPoint("CustomRuleFailures", "Count", (float(count),), {"Reason": reason}))
    for kind, count in sorted(errors.items()):
        points.append(MetricPoint("DerivationErrors", "Count", (float(count),), {"Kind": kind}))
    return points
