"""Deriving again from recorded inputs: what each decision was derived from, kept small enough to store with it,
and the same decision re-derived under another policy (``osprey policy replay``). Pure Python, no AWS import.

A decision's ``inputs`` hold, per node-level metric, the count, mean, min and max of the node values the engine
saw, and the job-level values. Those are exactly what the engine's aggregations (mean, min, max) read, so a
replay aggregates every metric to the value the engine computed then (:func:`metrics_from_inputs` builds nodes
with that count, mean, min and max), under any policy: another weight, range, scaling, aggregation or metric.
Custom rules are not invoked again: a replayed rule gets the answer its ARN gave in the recorded decision, and its
fallback when it gave none (a new rule, or one that fell back then).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osprey_control.derivation.custom import CustomRuleCall, CustomRuleError, FailureReason
from osprey_control.derivation.engine import CompiledPolicy, Decision, derive
from osprey_control.derivation.inputs import JobMetrics, NodeMetrics

__all__ = [
    "INPUTS_KEY",
    "RecordedAnswers",
    "ReplayedDecision",
    "metrics_from_inputs",
    "replay_job",
    "summarize_inputs",
]

INPUTS_KEY = "inputs"


def summarize_inputs(job: JobMetrics) -> dict[str, Any]:
    """What ``job`` gives the engine, in a few numbers per metric: ``{"nodes": {metric: [count, mean, min, max]},
    "job": {metric: value}}`` and, when the job has any, ``"notes"``; gaps (absent, NaN, infinite) are left out, as the engine leaves them out."""
    by_metric: dict[str, list[float]] = {}
    for node in job.nodes:
        for metric, value in node.values.items():
            if isinstance(value, int | float) and math.isfinite(value):
                by_metric.setdefault(metric, []).append(float(value))
    nodes = {
        metric: [len(values), math.fsum(values) / len(values), min(values), max(values)]
        for metric, values in sorted(by_metric.items())
    }
    values = {
        metric: float(value)
        for metric, value in sorted(job.job_values.items())
        if isinstance(value, int | float) and math.isfinite(value)
    }
    summary: dict[str, Any] = {"nodes": nodes, "job": values}
    if job.notes:
        summary["notes"] = dict(job.notes)
    return summary


def _spread(count: int, mean: float, low: float, high: float) -> list[float]:
    """``count`` values whose mean, min and max are ``mean``, ``low`` and ``high``."""
    if count <= 1:
        return [mean]
    if count == 2:
        return [low, high]
    rest = (count * mean - low - high) / (count - 2)
    return [low, high, *([min(max(rest, low), high)] * (count - 2))]


def metrics_from_inputs(job_id: str, inputs: Mapping[str, Any], *, backend: str = "unknown") -> JobMetrics:
    """A :class:`JobMetrics` that the engine aggregates exactly as it did the recorded job. ValueError naming the
    field if ``inputs`` is not what :func:`summarize_inputs` writes."""
    nodes: list[NodeMetrics] = []
    for metric, summary in dict(inputs.get("nodes") or {}).items():
        if not (isinstance(summary, Sequence) and len(summary) == 4):
            raise ValueError(f"inputs.nodes.{metric}: expected [count, mean, min, max], got {summary!r}")
        count, mean, low, high = int(summary[0]), float(summary[1]), float(summary[2]), float(summary[3])
        nodes.extend(
            NodeMetrics(f"{metric}#{index}", {metric: value})
            for index, value in enumerate(_spread(count, mean, low, high))
        )
    job_values = {str(metric): float(value) for metric, value in dict(inputs.get("job") or {}).items()}
    return JobMetrics(job_id=job_id, nodes=tuple(nodes), job_values=job_values, backend=backend)


class RecordedAnswers:
    """An invoker that answers each custom rule with what its ARN answered in the recorded decision."""

    def __init__(self, decision: Mapping[str, Any]) -> None:
        self._answers: dict[str, float] = {
            str(rule["arn"]): float(rule["value"])
            for rule in decision.get("rules") or ()
            if rule.get("kind") == "custom"
            and rule.get("outcome") == "answered"
            and rule.get("value") is not None
        }

    def invoke(self, call: CustomRuleCall) -> Any:
        if call.arn not in self._answers:
            raise CustomRuleError(FailureReason.NOT_INVOKED, "no recorded answer to replay")
        return {"derived_priority": self._answers[call.arn]}


@dataclass(frozen=True, slots=True)
class ReplayedDecision:
    """One recorded decision and the same step under the new policy."""

    recorded_at: str
    old_priority: int
    new_priority: int
    new: Decision
    replayable: bool  # False: the decision was recorded without its inputs (before they were kept)


def replay_job(
    policy: CompiledPolicy, job_id: str, decisions: Sequence[Mapping[str, Any]]
) -> list[ReplayedDecision]:
    """Re-derive a job's recorded decisions (oldest first; history items as :class:`JobHistory` returns them)
    under ``policy``, each from the previous *replayed* priority, so damping and deadband act as they would have.
    A decision without inputs keeps the replay where it was (and says so)."""
    replayed: list[ReplayedDecision] = []
    previous: int | None = None
    for item in decisions:
        decision = item.get("decision") or {}
        old = int(item.get("derived_priority", decision.get("priority", 0)))
        if previous is None:
            recorded_previous = decision.get("previous")
            previous = int(recorded_previous) if recorded_previous is not None else None
        inputs = decision.get(INPUTS_KEY)
        job = metrics_from_inputs(job_id, inputs) if isinstance(inputs, Mapping) else JobMetrics(job_id)
        new = derive(policy, job, previous, RecordedAnswers(decision))
        if not isinstance(inputs, Mapping):
            new = Decision(new.policy, job_id, new.previous, new.previous, None, None, "no-data", ())
        replayed.append(
            ReplayedDecision(
                str(item.get("recorded_at", "")), old, new.priority, new, isinstance(inputs, Mapping)
            )
        )
        previous = new.priority
    return replayed
