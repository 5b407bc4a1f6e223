"""The job-level metrics of one job (docs/design.md §3): ``queue_wait``, ``attained_service``, ``remaining_time``,
``requested_gpus``, from its registry record and the runtime's latest progress report.

The arithmetic is :mod:`osprey_control.derivation.job_signals` (the simulator uses the same functions); this
module only turns a :class:`JobRecord` into its inputs. Unknown stays absent (no key), never 0:

- ``attained_service`` is known when the record has an allocation history, or the job never ran (PENDING or
  STARTING with no history: 0 GPU-hours). A RUNNING or finished job without history (a record written before
  histories were kept) and an interval whose GPU count is unknown make it absent.
- ``remaining_time``: a usable progress report (the runtime's ``RemainingSeconds``) of a RUNNING job; else
  its budget (``expected_runtime``, else the declared runtime limit) minus the time it has held its GPUs,
  when that time is known.
- ``requested_gpus``: the record's, when known.
"""

from __future__ import annotations

from datetime import UTC, datetime

from osprey_control.derivation import (
    AllocationInterval,
    ProgressReport,
    attained_service_gpu_hours,
    held_seconds,
    job_level_values,
    remaining_time_s,
)
from osprey_control.registry import JobRecord, JobStatus

__all__: list[str] = []

_NEVER_RAN = frozenset({JobStatus.PENDING, JobStatus.STARTING})

# The latest (timestamp, value) of each progress signal of one job: remaining_seconds
# (collect.queries.PROGRESS_SOURCES).
ProgressPoints = dict[str, tuple[datetime, float]]


def progress_report(points: ProgressPoints, *, period_seconds: int, end: datetime) -> ProgressReport | None:
    """The job's latest progress from its lead host's ``RemainingSeconds``, None without one.

    The value is the Minimum of its period, reported at the latest at the end of that period (CloudWatch
    stamps a datapoint with the period's start), so that end, capped at ``end``, dates the report: the time
    since the report is then never overstated, nor the remaining time understated, by up to a period.
    """
    remaining = points.get("remaining_seconds")
    if remaining is None:
        return None
    reported = min(remaining[0].timestamp() + period_seconds, end.timestamp())
    return ProgressReport(remaining_s=remaining[1], at_s=reported)


def _intervals(record: JobRecord) -> tuple[list[AllocationInterval], bool]:
    """The record's intervals (GPUs 0 where unknown) and whether every GPU count is known."""
    intervals = record.allocation_intervals()
    gpus_known = not record.allocations.folded_gpus_unknown and all(interval.gpus for interval in intervals)
    return intervals, gpus_known


def job_values(
    record: JobRecord, *, end: datetime, progress: ProgressReport | None = None
) -> dict[str, float]:
    """``JobMetrics.job_values`` of ``record`` at ``end`` (module docstring)."""
    now_s = end.timestamp()
    queue_wait: float | None = None
    if record.submitted_at is not None:
        submitted = record.submitted_at
        if submitted.tzinfo is None:
            submitted = submitted.replace(tzinfo=UTC)
        queue_wait = (end - submitted).total_seconds()

    allocations = record.allocations
    history_known = not allocations.empty or record.status in _NEVER_RAN
    intervals, gpus_known = _intervals(record)
    held = held_seconds(intervals, now_s) + allocations.folded_seconds if history_known else None
    attained: float | None = None
    if history_known and gpus_known:
        attained = attained_service_gpu_hours(intervals, now_s) + allocations.folded_gpu_seconds / 3600.0

    running = record.status is JobStatus.RUNNING
    remaining: float | None = None
    if progress is not None and progress.usable:
        remaining = remaining_time_s(now_s=now_s, progress=progress, running=running, held_s=held or 0.0)
    elif held is not None:
        remaining = remaining_time_s(
            now_s=now_s,
            progress=None,
            running=running,
            held_s=held,
            expected_runtime_s=record.block.expected_runtime,
            declared_limit_s=record.declared_runtime_s,
        )
    return job_level_values(
        queue_wait_s=queue_wait,
        attained_gpu_hours=attained,
        remaining_s=remaining,
        requested_gpus=record.requested_gpus,
    )
