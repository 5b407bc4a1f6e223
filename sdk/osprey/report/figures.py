"""The report's numbers over one time interval of one backend. Pure Python; definitions in docs/report.md.

Each figure uses the simulator's definition where one applies (docs/scheduling.md "Metrics"): queue wait is its
queueing delay (mean, and p95 by nearest rank), priority changes per job-hour its oscillation figure. The
idle-while-waiting GPU-hours are the registry's counterpart of the simulator's "allocated but not training",
counted only while another job of the same pool waits (:func:`idle_while_waiting`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from osprey.report.model import IDLE_UTILIZATION_PCT, SHADOW_OUTCOME, JobTrail
from osprey.report.timeline import Timeline, moment, overlap_s

__all__ = ["Figures", "figures", "percentile"]


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (0 for no values): ``osprey.simulate.results.percentile``'s definition, kept here so
    the report does not load the simulator."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


@dataclass
class Figures:
    start: datetime
    end: datetime
    jobs: int = 0  # jobs alive (submitted, not finished) at some point of the interval
    started: int = 0  # jobs whose first allocation began in the interval: the ones whose wait is counted
    waits_s: list[float] = field(default_factory=list)
    still_waiting: int = 0  # jobs waiting at the interval's end (their wait so far is not in the mean)
    gpu_hours: float = 0.0
    unknown_gpu_job_hours: float = 0.0  # allocated time of jobs whose GPU count is unknown (not in gpu_hours)
    idle_gpu_hours: float = 0.0
    unknown_utilization_gpu_hours: float = 0.0  # allocated while others waited, no utilization recorded yet
    priority_changes: int = 0
    job_hours: float = 0.0
    gangs: dict[str, int] = field(
        default_factory=lambda: {"ready": 0, "ready_in_time": 0, "serial": 0, "failed": 0, "requeues": 0}
    )
    shadow_decisions: int = 0
    shadow_order_changes: int = 0

    @property
    def mean_wait_s(self) -> float | None:
        return math.fsum(self.waits_s) / len(self.waits_s) if self.waits_s else None

    @property
    def p95_wait_s(self) -> float | None:
        return percentile(self.waits_s, 0.95) if self.waits_s else None

    @property
    def changes_per_job_hour(self) -> float | None:
        return self.priority_changes / self.job_hours if self.job_hours > 0 else None

    def to_dict(self) -> dict[str, Any]:
        def rounded(value: float | None, digits: int = 2) -> float | None:
            return None if value is None else round(value, digits)

        return {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "jobs": self.jobs,
            "started": self.started,
            "mean_wait_s": rounded(self.mean_wait_s, 1),
            "p95_wait_s": rounded(self.p95_wait_s, 1),
            "still_waiting": self.still_waiting,
            "gpu_hours": rounded(self.gpu_hours),
            "unknown_gpu_job_hours": rounded(self.unknown_gpu_job_hours),
            "idle_while_waiting_gpu_hours": rounded(self.idle_gpu_hours),
            "unknown_utilization_while_waiting_gpu_hours": rounded(self.unknown_utilization_gpu_hours),
            "priority_changes": self.priority_changes,
            "job_hours": rounded(self.job_hours),
            "priority_changes_per_job_hour": rounded(self.changes_per_job_hour, 3),
            "gangs": dict(self.gangs),
            "shadow": {"decisions": self.shadow_decisions, "order_changes": self.shadow_order_changes},
        }


def _add_jobs(result: Figures, timelines: Sequence[Timeline]) -> None:
    low, high = result.start, result.end
    for line in timelines:
        lived = overlap_s(line.submitted, line.end, low, high)
        if lived <= 0 and not (low <= line.submitted < high):
            continue
        result.jobs += 1
        result.job_hours += lived / 3600
        if line.first_start is not None and low <= line.first_start < high and line.queue_wait_s is not None:
            result.started += 1
            result.waits_s.append(line.queue_wait_s)
        if any(span.start < high <= span.end for span in line.waiting):
            result.still_waiting += 1
        for span in line.allocated:
            seconds = overlap_s(span.start, span.end, low, high)
            if span.gpus is None:
                result.unknown_gpu_job_hours += seconds / 3600
            else:
                result.gpu_hours += seconds * span.gpus / 3600
        result.priority_changes += sum(1 for at in line.changes if low <= at < high)


def idle_while_waiting(timelines: Sequence[Timeline], low: datetime, high: datetime) -> tuple[float, float]:
    """(idle, unknown) GPU-hours of one pool in [low, high): GPUs allocated to a job whose last recorded
    utilization is below :data:`IDLE_UTILIZATION_PCT` (unknown: none recorded in that allocation yet), counted
    only while at least one other job of the pool waits. Constant between breakpoints (allocation and waiting
    bounds, recorded decisions), so it is summed exactly piece by piece."""
    points = {low, high}
    for line in timelines:
        for span in (*line.allocated, *line.waiting):
            points.update(t for t in (span.start, span.end) if low < t < high)
        points.update(at for at, _ in line.utilization if low < at < high)
    ordered = sorted(points)
    idle = unknown = 0.0
    for a, b in itertools.pairwise(ordered):
        if not any(w.start <= a and b <= w.end for line in timelines for w in line.waiting):
            continue
        hours = (b - a).total_seconds() / 3600
        for line in timelines:
            for span in line.allocated:
                if span.gpus is None or not (span.start <= a and b <= span.end):
                    continue
                value = line.utilization_at(a, span)
                if value is None:
                    unknown += span.gpus * hours
                elif value < IDLE_UTILIZATION_PCT:
                    idle += span.gpus * hours
    return idle, unknown


def _add_gangs(result: Figures, trails: Sequence[JobTrail]) -> None:
    for trail in trails:
        gang = trail.gang
        if not gang:
            continue
        phase = str(gang.get("phase", ""))
        when = moment(gang.get("ready_at") if phase == "ready" else gang.get("updated_at"))
        if phase not in ("ready", "serial", "failed") or when is None:
            continue  # still watching, or ended with its job: not an outcome of co-scheduling
        if result.start <= when < result.end:
            result.gangs[phase] += 1
            result.gangs["ready_in_time"] += 1 if gang.get("ready_in_time") is True else 0
            result.gangs["requeues"] += int(gang.get("requeues") or 0)


def _add_shadow(result: Figures, timelines: Mapping[str, Timeline], trails: Sequence[JobTrail]) -> None:
    """Shadow decisions in the interval and those that would have changed the order: the job's new priority
    passes another job alive in its pool (one whose current shadow priority lies strictly between the job's
    old and new ones), or, for a job's first, it ranks above a job of its pool submitted before it (which a
    first-come order would have kept ahead)."""
    events = sorted(
        (at, str(trail.record.key), int(item["priority"]))
        for trail in trails
        for item in trail.applies
        if item.get("outcome") == SHADOW_OUTCOME
        and item.get("priority") is not None
        and (at := moment(item.get("recorded_at"))) is not None
    )
    current: dict[str, int] = {}
    for at, key, new in events:
        line = timelines[key]
        old = current.get(key)
        others = [
            (other, current[name])
            for name, other in timelines.items()
            if name != key
            and name in current
            and other.pool == line.pool
            and other.submitted <= at < other.end
        ]
        if old is None:
            changed = any(other.submitted < line.submitted and value < new for other, value in others)
        else:
            changed = any(min(old, new) < value < max(old, new) for _, value in others)
        current[key] = new
        if result.start <= at < result.end:
            result.shadow_decisions += 1
            result.shadow_order_changes += int(changed)


def figures(
    trails: Sequence[JobTrail], timelines: Mapping[str, Timeline], low: datetime, high: datetime
) -> Figures:
    """Every figure of one backend's jobs (``trails``, their ``timelines`` by job key) over [low, high)."""
    result = Figures(start=low, end=high)
    lines = [timelines[str(trail.record.key)] for trail in trails]
    _add_jobs(result, lines)
    for pool in sorted({line.pool for line in lines}):
        idle, unknown = idle_while_waiting([line for line in lines if line.pool == pool], low, high)
        result.idle_gpu_hours += idle
        result.unknown_utilization_gpu_hours += unknown
    _add_gangs(result, trails)
    _add_shadow(result, timelines, trails)
    return result
