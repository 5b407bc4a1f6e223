"""Job-level signals (docs/design.md §3): one definition for the collector (from the registry) and the simulator.

The engine reads four metrics that describe a *job* rather than its nodes, so they exist for a queued job too
and let a policy order jobs that have not started:

- ``queue_wait``: seconds since submission (the collector) or spent queued (the simulator);
- ``attained_service``: GPU-hours the job has held so far over all its attempts, from its allocation
  intervals (Tiresias' least-attained-service signal);
- ``remaining_time``: seconds the job still needs. From the runtime's latest progress report when there is
  one (``RemainingSeconds``: the runtime's ``(total steps - step) x step time``); before that, the job's time
  budget (the block's ``expected_runtime``, else the declared runtime limit: SageMaker ``StoppingCondition``,
  Batch ``timeout``, Slurm time limit) minus the time it has held its allocation. A job with neither has no
  data;
- ``requested_gpus``: the GPUs the job asks for, from its description.

Everything here is pure arithmetic on epoch seconds: the caller supplies the clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "AllocationInterval",
    "ProgressReport",
    "attained_service_gpu_hours",
    "held_seconds",
    "job_level_values",
    "remaining_time_s",
]

_SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class AllocationInterval:
    """The job held ``gpus`` GPUs from ``start_s`` until ``end_s`` (None: it still holds them)."""

    start_s: float
    end_s: float | None
    gpus: int

    def seconds(self, now_s: float) -> float:
        end = now_s if self.end_s is None else min(self.end_s, now_s)
        return max(0.0, end - self.start_s)


@dataclass(frozen=True, slots=True)
class ProgressReport:
    """The runtime's latest ``report_progress``: ``remaining_s`` seconds still to train, as of ``at_s``.

    The runtime does the arithmetic (``(total - step) x`` its measured step time) and reports only the result,
    one series per job instead of three.
    """

    remaining_s: float
    at_s: float

    @property
    def usable(self) -> bool:
        return math.isfinite(self.remaining_s) and self.remaining_s >= 0


def held_seconds(intervals: Iterable[AllocationInterval], now_s: float) -> float:
    """Wall-clock seconds the job has held an allocation, over all attempts."""
    return math.fsum(interval.seconds(now_s) for interval in intervals)


def attained_service_gpu_hours(intervals: Iterable[AllocationInterval], now_s: float) -> float:
    """GPU-hours the job has held so far (allocated, whether or not it was training)."""
    return math.fsum(interval.gpus * interval.seconds(now_s) for interval in intervals) / _SECONDS_PER_HOUR


def remaining_time_s(
    *,
    now_s: float,
    progress: ProgressReport | None,
    running: bool,
    held_s: float,
    expected_runtime_s: float | None = None,
    declared_limit_s: float | None = None,
) -> float | None:
    """Seconds the job still needs, or None when nothing says (docs/design.md §3 ``remaining_time``).

    A progress report wins: its remaining seconds, less the time since the report while the job is running
    (it kept training). Otherwise the budget (``expected_runtime_s``, the user's own estimate, before
    ``declared_limit_s``, a limit users set with a margin) minus ``held_s``. Never negative.
    """
    if progress is not None and progress.usable:
        remaining = progress.remaining_s
        if running:
            remaining -= max(0.0, now_s - progress.at_s)
        return max(0.0, remaining)
    budget = expected_runtime_s if expected_runtime_s is not None else declared_limit_s
    if budget is None or not math.isfinite(budget):
        return None
    return max(0.0, budget - held_s)


def job_level_values(
    *,
    queue_wait_s: float | None = None,
    attained_gpu_hours: float | None = None,
    remaining_s: float | None = None,
    requested_gpus: int | None = None,
) -> dict[str, float]:
    """The engine's ``JobMetrics.job_values``: every signal that has data, by its metric name."""
    values: dict[str, float] = {}
    if queue_wait_s is not None:
        values["queue_wait"] = max(0.0, float(queue_wait_s))
    if attained_gpu_hours is not None:
        values["attained_service"] = max(0.0, float(attained_gpu_hours))
    if remaining_s is not None:
        values["remaining_time"] = max(0.0, float(remaining_s))
    if requested_gpus is not None and requested_gpus > 0:
        values["requested_gpus"] = float(requested_gpus)
    return values
