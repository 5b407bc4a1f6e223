"""One job's history as intervals: when it waited, when it held how many GPUs, what utilization its decisions
recorded and when its derived priority changed. Pure Python; the definitions are docs/report.md's.

- **End**: a finished job ends at its status time; an active one at the report's ``now``.
- **Allocated**: the allocation history's intervals (``JobRecord.allocations``: only RUNNING holds GPUs), with
  ``requested_gpus`` where an interval's count is unknown (else the sum of the nodes' GPUs, when all are known); an open interval runs to the job's end. Intervals
  folded away (more than 64 marks) are placed as one interval of their total length ending at ``folded_until``.
- **Waiting**: submitted and not holding GPUs, before the job's end: submission to the first interval, each gap
  between intervals (a requeue), and, for an active job whose last interval closed, from then on.
- **Queue wait** (the simulator's queueing delay): submission to the first interval plus every gap that ended in
  another interval; None for a job that never ran.
- **Utilization**: the mean ``gpu_utilization`` over the job's nodes in each recorded decision's ``inputs``; it
  stands until the next recorded decision, and only within the allocation interval it was recorded in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from osprey.report.model import JobTrail
from osprey_control.derivation import INPUTS_KEY
from osprey_control.registry import JobRecord, JobStatus, parse_time
from osprey_control.wiring import GUARD_CYCLE_NOTE, GUARD_ORDER_NOTE

__all__ = ["Span", "Timeline", "build_timeline", "guard_verdicts", "moment", "overlap_s", "pool_of"]

_FINISHED = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED})


@dataclass(frozen=True, slots=True)
class Span:
    start: datetime
    end: datetime
    gpus: int | None = None  # for an allocation; None: unknown (no requested_gpus either)


def moment(value: Any) -> datetime | None:
    """A history item's ISO time as an aware datetime (None when absent or unreadable)."""
    try:
        return parse_time(str(value)) if value else None
    except ValueError:
        return None


def overlap_s(start: datetime, end: datetime, low: datetime, high: datetime) -> float:
    """Seconds of [start, end) inside [low, high)."""
    return max(0.0, (min(end, high) - max(start, low)).total_seconds())


def pool_of(record: JobRecord) -> str:
    """The GPUs a job competes for: its backend and cluster (EKS, Slurm) or job queue (Batch, service jobs)."""
    return f"{record.backend.value}:{record.cluster or record.job_queue or '-'}"


@dataclass(frozen=True)
class Timeline:
    record: JobRecord
    pool: str
    submitted: datetime
    end: datetime
    allocated: tuple[Span, ...]
    waiting: tuple[Span, ...]
    queue_wait_s: float | None
    first_start: datetime | None
    utilization: tuple[tuple[datetime, float], ...]  # (recorded_at, mean %), oldest first
    changes: tuple[datetime, ...]  # when the derived priority changed


def _known_gpus(record: JobRecord) -> int | None:
    """What the job asked for, else what its nodes hold when every node's count is known (as last observed)."""
    if record.requested_gpus is not None:
        return record.requested_gpus
    counts = [node.gpus for node in record.nodes]
    return sum(c for c in counts if c is not None) if counts and None not in counts else None


def _allocated(record: JobRecord, end: datetime) -> list[Span]:
    history = record.allocations
    fallback = _known_gpus(record)
    spans: list[Span] = []
    if history.folded_until is not None and history.folded_seconds > 0:
        gpus = round(history.folded_gpu_seconds / history.folded_seconds) or None
        start = history.folded_until - timedelta(seconds=history.folded_seconds)
        spans.append(Span(start, history.folded_until, None if history.folded_gpus_unknown else gpus))
    for span in history.spans():
        stop = min(span.end or end, end)
        if stop > span.start:
            spans.append(Span(span.start, stop, span.gpus or fallback))
    return spans


def _utilization(decision: Mapping[str, Any] | None) -> float | None:
    summary = ((decision or {}).get(INPUTS_KEY) or {}).get("nodes", {}).get("gpu_utilization")
    if isinstance(summary, list | tuple) and len(summary) == 4:
        return float(summary[1])
    return None


def _changed(item: Mapping[str, Any]) -> bool:
    decision = item.get("decision") or {}
    previous = item.get("previous_priority", decision.get("previous"))
    derived = item.get("derived_priority", decision.get("priority"))
    return previous is not None and derived is not None and int(previous) != int(derived)


def build_timeline(record: JobRecord, decisions: tuple[Mapping[str, Any], ...], now: datetime) -> Timeline:
    """The job's intervals (module docstring) from its record and recorded decisions."""
    first_mark = record.allocations.marks[0].at if record.allocations.marks else None
    submitted = min(t for t in (record.submitted_at, first_mark, record.status_time) if t is not None)
    end = max(submitted, record.status_time if record.status in _FINISHED else now)
    allocated = _allocated(record, end)
    waiting: list[Span] = []
    wait_s: float | None = None
    cursor = submitted
    for index, span in enumerate(allocated):
        if span.start > cursor:
            waiting.append(Span(cursor, span.start))
        if index == 0:
            wait_s = 0.0
        wait_s = (wait_s or 0.0) + max(0.0, (span.start - cursor).total_seconds())
        cursor = max(cursor, span.end)
    if (not allocated or record.status not in _FINISHED) and end > cursor:
        waiting.append(Span(cursor, end))  # still queued (or requeued), or left the queue without running
    samples = []
    for item in decisions:
        at, value = moment(item.get("recorded_at")), _utilization(item.get("decision"))
        if at is not None and value is not None:
            samples.append((at, value))
    changes = [at for item in decisions if _changed(item) and (at := moment(item.get("recorded_at")))]
    return Timeline(
        record=record,
        pool=pool_of(record),
        submitted=submitted,
        end=end,
        allocated=tuple(allocated),
        waiting=tuple(waiting),
        queue_wait_s=wait_s,
        first_start=allocated[0].start if allocated else None,
        utilization=tuple(sorted(samples)),
        changes=tuple(sorted(changes)),
    )


def guard_verdicts(trails: Iterable[JobTrail]) -> tuple[tuple[datetime, str], ...]:
    """The guard's verdicts the decisions recorded, one per pool and cycle: (the cycle's instant, the order).

    Every decision of a guarded pool carries its cycle's instant and order (``inputs.notes``); the jobs of one
    pool in one cycle share them, so a pool-cycle counts once however many of its jobs' decisions were written.
    Decisions are written only on change: a cycle in which no job of the pool changed priority or reason is not
    recorded (docs/report.md says what that means for the counts)."""
    seen: dict[tuple[str, str], tuple[datetime, str]] = {}
    for trail in trails:
        pool = pool_of(trail.record)
        for item in trail.decisions:
            notes = ((item.get("decision") or {}).get(INPUTS_KEY) or {}).get("notes") or {}
            if not isinstance(notes, Mapping):
                continue
            order, cycle = notes.get(GUARD_ORDER_NOTE), notes.get(GUARD_CYCLE_NOTE)
            at = moment(cycle)
            if isinstance(order, str) and at is not None:
                seen.setdefault((pool, str(cycle)), (at, order))
    return tuple(sorted(seen.values()))
