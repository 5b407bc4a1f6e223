"""What the engine derives from: one job's metrics, per node, in raw units (docs/design.md §3 table)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["JobMetrics", "NodeMetrics", "mean_of_gpus"]


def mean_of_gpus(values: float | Sequence[float]) -> float | None:
    """A node's value from a number or a list of per-GPU numbers (averaged); an empty list is no data."""
    if isinstance(values, int | float):
        return float(values)
    if not values:
        return None
    count = len(values)
    try:
        return math.fsum(values) / count
    except OverflowError:  # finite values whose sum exceeds float range: scale first
        return math.fsum(value / count for value in values)


@dataclass(frozen=True, slots=True)
class NodeMetrics:
    """One node (EC2 instance, SageMaker host or pod): metric name → raw value, GPU values already averaged.

    A metric that is absent has no data on this node; it is never read as zero.
    """

    node_id: str
    values: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobMetrics:
    """One job: its job-level values (``queue_wait``, ``attained_service``, ``remaining_time``,
    ``requested_gpus``: :mod:`osprey_control.derivation.job_signals`) and its nodes."""

    job_id: str
    nodes: Sequence[NodeMetrics] = ()
    job_values: Mapping[str, float] = field(default_factory=dict)
    backend: str = "unknown"
    name: str = ""
    # Why a cross-job signal has its value (the reservation's role and predicted start), for ``osprey explain``.
    notes: Mapping[str, str] = field(default_factory=dict)
    # The priority the pool's guard stood down to (the backend's native order, osprey_control.guard): set, the
    # engine writes it as it is, since the native order is only kept if every job is exactly at its value.
    pinned_priority: int | None = None
    # The least priority the guard lets a running job have this cycle (osprey_control.guard, "no new
    # preemption"): on a backend that preempts by priority, it keeps the job above the queued work its native
    # place protects it from. Applied undamped, as a pin is; None: no floor.
    priority_floor: int | None = None
