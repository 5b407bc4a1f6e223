"""The report's numbers over one time interval of one backend. Pure Python; definitions in docs/report.md.

Each figure uses the simulator's definition where one applies (docs/scheduling.md "Metrics"): queue wait is its
queueing delay (mean, and p95 by nearest rank), priority changes per job-hour its oscillation figure. The
idle-while-waiting GPU-hours are the registry's counterpart of the simulator's "allocated but not training",
counted only while another job of the same pool waits (:func:`_idle_pieces`).
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from osprey.report.model import IDLE_UTILIZATION_PCT, SHADOW_OUTCOME, JobTrail
from osprey.report.timeline import Timeline, guard_verdicts, moment, overlap_s

__all__ = ["Figures", "Prepared", "figures", "percentile", "prepare"]

NATIVE_ORDER = "native"  # the guard's order when it stands down (osprey_control.guard.NATIVE)


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
    # The guard's recorded verdicts: pool-cycles guarded, by the order chosen ("native": stood down).
    guard_orders: dict[str, int] = field(default_factory=dict)

    @property
    def guard_cycles(self) -> int:
        return sum(self.guard_orders.values())

    @property
    def guard_stood_down(self) -> int:
        return self.guard_orders.get(NATIVE_ORDER, 0)

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
            "guard": {
                "cycles": self.guard_cycles,
                "stood_down": self.guard_stood_down,
                "orders": dict(sorted(self.guard_orders.items())),
            },
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


def _idle_pieces(lines: Sequence[Timeline]) -> list[tuple[datetime, datetime, float, float]]:
    """One pool's (start, end, idle GPUs, unknown GPUs) pieces during which at least one job waited.

    GPUs allocated to a job whose last recorded utilization in that allocation is below
    :data:`IDLE_UTILIZATION_PCT` are idle; before the allocation's first recorded utilization, unknown. Every
    quantity is a step function, so one sweep over the sorted steps sums them exactly: O(n log n) in steps.
    """
    steps: list[tuple[datetime, int, float, float]] = []  # (time, waiting delta, idle delta, unknown delta)
    for line in lines:
        for span in line.waiting:
            steps += [(span.start, 1, 0.0, 0.0), (span.end, -1, 0.0, 0.0)]
        for span in line.allocated:
            if span.gpus is None:
                continue
            inside = [(at, value) for at, value in line.utilization if span.start <= at < span.end]
            bounds = [(span.start, None), *inside, (span.end, None)]
            for (a, value), (b, _) in itertools.pairwise(bounds):
                idle = float(span.gpus) if value is not None and value < IDLE_UTILIZATION_PCT else 0.0
                unknown = float(span.gpus) if value is None else 0.0
                steps += [(a, 0, idle, unknown), (b, 0, -idle, -unknown)]
    steps.sort(key=lambda step: step[0])
    pieces = []
    waiting, idle, unknown = 0, 0.0, 0.0
    for index, (at, d_wait, d_idle, d_unknown) in enumerate(steps):
        waiting, idle, unknown = waiting + d_wait, idle + d_idle, unknown + d_unknown
        following = steps[index + 1][0] if index + 1 < len(steps) else at
        if following > at and waiting > 0 and (idle > 1e-9 or unknown > 1e-9):
            pieces.append((at, following, idle, unknown))
    return pieces


def _shadow_flags(lines: Sequence[Timeline], trails: Sequence[JobTrail]) -> list[tuple[datetime, bool]]:
    """One pool's shadow decisions, each with whether it would have changed the order: the job's new priority
    passes another job alive in the pool (one whose current shadow priority lies strictly between the job's old
    and new ones), or, for a job's first, it ranks above an alive job already placed (first come, first served
    would have kept that one ahead). A sweep over decisions and job ends with the alive priorities sorted."""
    ends = {str(line.record.key): line.end for line in lines}
    # At one instant a job's end comes first: a job is alive from its submission to before its end.
    events = sorted(
        [(end, 0, key, 0) for key, end in ends.items()]
        + [
            (at, 1, str(trail.record.key), int(item["priority"]))
            for trail in trails
            for item in trail.applies
            if item.get("outcome") == SHADOW_OUTCOME
            and item.get("priority") is not None
            and (at := moment(item.get("recorded_at"))) is not None
        ]
    )
    current: dict[str, int] = {}
    ended: set[str] = set()
    alive: list[int] = []  # the current shadow priorities of the alive, placed jobs, sorted
    flags = []
    for at, kind, key, new in events:
        old = current.get(key)
        if kind == 0:
            ended.add(key)
            if old is not None:
                alive.pop(bisect_left(alive, old))
            continue
        if key in ended:
            flags.append((at, False))  # recorded after the job's end: nothing left to reorder
            continue
        if old is not None:
            alive.pop(bisect_left(alive, old))
            low, high = min(old, new), max(old, new)
            changed = bisect_right(alive, low) < bisect_left(alive, high)
        else:
            changed = bisect_left(alive, new) > 0
        insort(alive, new)
        current[key] = new
        flags.append((at, changed))
    return flags


@dataclass(frozen=True)
class Prepared:
    """One backend's jobs with what every row needs computed once: the idle pieces and the shadow flags."""

    lines: tuple[Timeline, ...]
    gangs: tuple[Mapping[str, Any], ...]
    idle: tuple[tuple[datetime, datetime, float, float], ...]
    shadow: tuple[tuple[datetime, bool], ...]
    guard: tuple[tuple[datetime, str], ...] = ()  # (the cycle's instant, the order) per pool-cycle recorded


def prepare(trails: Sequence[JobTrail], timelines: Mapping[str, Timeline]) -> Prepared:
    """``trails`` (one backend's) with their ``timelines`` (by job key), ready for :func:`figures`."""
    lines = [timelines[str(trail.record.key)] for trail in trails]
    idle: list[tuple[datetime, datetime, float, float]] = []
    shadow: list[tuple[datetime, bool]] = []
    for pool in sorted({line.pool for line in lines}):
        keys = {str(line.record.key) for line in lines if line.pool == pool}
        pool_lines = [line for line in lines if line.pool == pool]
        idle += _idle_pieces(pool_lines)
        shadow += _shadow_flags(pool_lines, [trail for trail in trails if str(trail.record.key) in keys])
    gangs = tuple(trail.gang for trail in trails if trail.gang)
    return Prepared(tuple(lines), gangs, tuple(idle), tuple(shadow), guard_verdicts(trails))


def _add_gangs(result: Figures, gangs: Sequence[Mapping[str, Any]]) -> None:
    for gang in gangs:
        phase = str(gang.get("phase", ""))
        when = moment(gang.get("ready_at") if phase == "ready" else gang.get("updated_at"))
        if phase not in ("ready", "serial", "failed") or when is None:
            continue  # still watching, or ended with its job: not an outcome of co-scheduling
        if result.start <= when < result.end:
            result.gangs[phase] += 1
            result.gangs["ready_in_time"] += 1 if gang.get("ready_in_time") is True else 0
            result.gangs["requeues"] += int(gang.get("requeues") or 0)


def figures(prepared: Prepared, low: datetime, high: datetime) -> Figures:
    """Every figure of one backend (:func:`prepare`) over [low, high)."""
    result = Figures(start=low, end=high)
    _add_jobs(result, prepared.lines)
    for a, b, idle, unknown in prepared.idle:
        hours = overlap_s(a, b, low, high) / 3600
        result.idle_gpu_hours += idle * hours
        result.unknown_utilization_gpu_hours += unknown * hours
    _add_gangs(result, prepared.gangs)
    flags = [changed for at, changed in prepared.shadow if low <= at < high]
    result.shadow_decisions, result.shadow_order_changes = len(flags), sum(flags)
    for at, order in prepared.guard:
        if low <= at < high:
            result.guard_orders[order] = result.guard_orders.get(order, 0) + 1
    return result
