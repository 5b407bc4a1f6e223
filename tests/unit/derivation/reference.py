"""An independent, deliberately naive transcription of DESIGN §4, used as the oracle in property tests.

It reads the raw policy and metrics documents (dicts), not the engine's compiled form or input types.
"""

from __future__ import annotations

import math
from typing import Any

DEFAULT_RANGES = {
    "gpu_utilization": (0.0, 100.0),
    "memory_bandwidth_utilization": (0.0, 100.0),
    "gpu_memory_utilization": (0.0, 100.0),
    "node_interconnect_latency": (0.0, 2000.0),
    "spot_interruption_risk": (0.0, 1.0),
    "queue_wait": (0.0, 86400.0),
    "attained_service": (0.0, 1000.0),
    "remaining_time": (0.0, 259200.0),
    "requested_gpus": (1.0, 4096.0),
}
# Metrics measured once per job: they sit in the metrics file's ``job``, never in ``nodes`` (DESIGN §3).
JOB_LEVEL = frozenset({"queue_wait", "attained_service", "remaining_time", "requested_gpus"})


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def _node_value(value: Any) -> float | None:
    if isinstance(value, list):
        return math.fsum(value) / len(value) if value else None
    return float(value)


def reference_derive(
    policy: dict[str, Any], metrics: dict[str, Any], previous: int | None, answers: dict[int, float | None]
) -> tuple[int, float | None, str]:
    """(applied priority, target, reason). ``answers[i]`` is custom rule i's answer, None for a failure."""
    spec = policy["spec"]
    prev = spec.get("initialPriority", 50) if previous is None else previous
    components: list[tuple[float, float]] = []
    stages: list[float] = []
    for index, rule in enumerate(spec["derivationRules"]):
        if "custom" in rule:
            answer = answers.get(index)
            priority = rule["custom"]["fallbackPriority"] if answer is None else _clamp(answer, 0, 100)
            if "weight" in rule["custom"]:
                components.append((rule["custom"]["weight"], priority))
            else:
                stages.append(priority)
            continue
        metric = rule["metric"]
        if metric in JOB_LEVEL:
            raw = metrics.get("job", {}).get(metric)
            values = [] if raw is None else [float(raw)]
        else:
            values = []
            for node in metrics.get("nodes", []):
                if node.get(metric) is not None:
                    value = _node_value(node[metric])
                    if value is not None:
                        values.append(value)
        if not values:
            continue
        aggregation = rule.get("aggregation", "mean")
        v = (
            math.fsum(values) / len(values)
            if aggregation == "mean"
            else min(values)
            if aggregation == "min"
            else max(values)
        )
        lo, hi = rule.get("range", DEFAULT_RANGES[metric])
        x = _clamp((v - lo) / (hi - lo), 0, 1)
        s = {"linear": x, "logarithmic": math.log10(1 + 9 * x), "inverse": 1 - x}[rule["scaling"]]
        components.append(
            (rule["weight"], rule["minPriority"] + (rule["maxPriority"] - rule["minPriority"]) * s)
        )
    if not components and not stages:
        return prev, None, "no-data"
    value = float(prev)
    if components:
        value = sum(w * p for w, p in components) / sum(w for w, _ in components)
    for stage in stages:
        value = stage
    target = _clamp(value, 0, 100)
    delta = target - prev
    if abs(delta) < spec.get("deadband", 0):
        return prev, target, "deadband"
    limit = spec.get("maxPriorityChange", 10)
    step = _clamp(delta, -limit, limit)
    applied = math.floor(prev + step + 0.5)
    return applied, target, "damped" if step != delta else "derived"
