"""Shared builders for derivation tests: policies from short dicts, jobs from per-node values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from osprey_control.derivation import CustomRuleCall, JobMetrics, NodeMetrics
from osprey_control.policy import PriorityDerivationPolicy

ARN = "arn:aws:lambda:us-east-1:123456789012:function:osprey-rule-{}"

SEED_RULES: list[dict[str, Any]] = [
    {"metric": "gpu_utilization", "weight": 0.6, "scaling": "linear", "minPriority": 10, "maxPriority": 100},
    {
        "metric": "memory_bandwidth_utilization",
        "weight": 0.3,
        "scaling": "logarithmic",
        "minPriority": 5,
        "maxPriority": 100,
    },
    {
        "metric": "node_interconnect_latency",
        "weight": 0.1,
        "scaling": "inverse",
        "minPriority": 1,
        "maxPriority": 50,
    },
]


def policy(rules: list[dict[str, Any]] | None = None, **spec: Any) -> PriorityDerivationPolicy:
    return PriorityDerivationPolicy.model_validate(
        {
            "apiVersion": "osprey.aws/v1",
            "kind": "PriorityDerivationPolicy",
            "metadata": {"name": "test-policy"},
            "spec": {"derivationRules": rules if rules is not None else SEED_RULES, **spec},
        }
    )


def custom(name: str, fallback: float = 50, weight: float | None = None, **extra: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {"arn": ARN.format(name), "fallbackPriority": fallback, **extra}
    if weight is not None:
        rule["weight"] = weight
    return {"custom": rule}


def job(
    *nodes: Mapping[str, float],
    queue_wait: float | None = None,
    job_id: str = "j1",
    signals: Mapping[str, float] | None = None,
) -> JobMetrics:
    """A job with these nodes; ``queue_wait`` and ``signals`` (any job-level metric) go to ``job_values``."""
    job_values = dict(signals or {})
    if queue_wait is not None:
        job_values["queue_wait"] = queue_wait
    return JobMetrics(
        job_id=job_id,
        nodes=tuple(NodeMetrics(f"i-{index}", dict(values)) for index, values in enumerate(nodes)),
        job_values=job_values,
        backend="sagemaker",
        name=f"{job_id}-name",
    )


class RecordingInvoker:
    """Answers by function name; an answer that is an exception is raised. Records every call."""

    def __init__(self, answers: Mapping[str, Any]) -> None:
        self.answers = dict(answers)
        self.calls: list[CustomRuleCall] = []

    def invoke(self, call: CustomRuleCall) -> Any:
        self.calls.append(call)
        answer = self.answers[call.arn.rsplit(":", 1)[-1].removeprefix("osprey-rule-")]
        if isinstance(answer, BaseException):
            raise answer
        return answer
