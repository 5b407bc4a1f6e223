"""A job's CloudWatch-sourced values as its last decision used them: what a cycle that does not read the job
derives from (:mod:`osprey_control.metrics.cadence`).

The last decision (``JobRecord.last_decision``, ``Decision.to_dict()``) holds each built-in rule's aggregated
raw value. Putting that value on every node of the job makes the rule aggregate (mean, min or max) to the very
same value, so the rule gives the same priority and the weights are not renormalised: a cycle that does not
read CloudWatch neither loses a rule nor makes the priority jump back and forth. Damping (docs/design.md §4) still
applies to every derivation, so a job far from its target keeps moving by ``maxPriorityChange`` per cycle.

``remaining_time`` is reused too for a RUNNING job (its progress series are CloudWatch reads): the value is
then up to N cycles old, like the node metrics. The other job-level values (``queue_wait``,
``attained_service``, ``requested_gpus``, and ``remaining_time`` of a queued job) come from the registry and
stay fresh every cycle.

Not reusable, so the job is read this cycle anyway: no last decision (a new job), a metric the job needs that
the last decision does not name (its policy changed), or two rules on the same metric with different values
(different aggregations, which no single node value can reproduce).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from osprey_control.metrics.queries import CLOUDWATCH_NODE_METRICS

__all__: list[str] = []

# What a read would have supplied: the CloudWatch node metrics and the progress-based remaining_time.
REUSABLE_METRICS = CLOUDWATCH_NODE_METRICS | {"remaining_time"}


@dataclass(frozen=True, slots=True)
class Reused:
    """Per metric, the last decision's value; metrics whose rule had no data are absent (no data again)."""

    node_values: Mapping[str, float] = field(default_factory=dict)
    remaining_time: float | None = None


def reused_values(decision: Mapping[str, Any] | None, needed: frozenset[str] | None) -> Reused | None:
    """The values to derive from without reading, or None when the job must be read (module docstring).

    ``needed``: the CloudWatch-sourced metrics the job's policy reads (None: whatever the decision names)."""
    if not decision:
        return None
    named: set[str] = set()
    values: dict[str, set[float]] = {}
    for rule in decision.get("rules") or ():
        if not isinstance(rule, Mapping) or rule.get("kind") != "builtin":
            continue
        metric = rule.get("metric")
        if metric not in REUSABLE_METRICS:
            continue
        named.add(str(metric))
        value = rule.get("value")
        if rule.get("used") and isinstance(value, int | float) and math.isfinite(value):
            values.setdefault(str(metric), set()).add(float(value))
    if needed is not None and not (needed & REUSABLE_METRICS) <= named:
        return None
    if any(len(found) > 1 for found in values.values()):
        return None
    single = {metric: next(iter(found)) for metric, found in values.items()}
    remaining = single.pop("remaining_time", None)
    return Reused(single, remaining)
