"""The ``reservation`` signal: which queued job the pool's GPUs are being kept for, and which jobs would delay it.

Every cycle the control plane knows what no native scheduler knows: when each running job is predicted to end
(``remaining_time``: its progress report, else its declared limit), how large every queued job is, and the
order the policy wants. From these, per pool of GPUs (one Kueue ClusterQueue, Batch or SageMaker job queue, or
Slurm cluster), :func:`plan_reservations` does what EASY backfilling does (Lifka 1995; with *predicted* rather
than user-declared run times, as Tsafrir, Etsion and Feitelson showed in 2007):

1. Walk the queue in the policy's order (the last derived priority, then the longest waiting): every job that
   fits in the free GPUs would start now and is counted as running until its predicted end.
2. The first job that does not fit is the **head**. Its predicted start is the first instant at which the free
   GPUs plus those released by predicted ends reach its size; the GPUs free then beyond its size are the
   **extra**.
3. Each later queued job that fits now may start in front of the head only if it is predicted to end by then,
   or fits in the extra; otherwise starting it would push the head's start back: it is **held**.

4. With the policy's ``yieldFraction`` > 0: if running jobs that have held their GPUs for less than that
   fraction of the head's predicted wait (on their first attempt) would free the head's GPUs now, they
   **yield**: the head's predicted start becomes now instead of a drain.

The signal (``Metric.RESERVATION``, 0..1) orders the pool so that each backend does the rest with what it
already does:

====================  =====  ==========================================================================
role                  value  why
====================  =====  ==========================================================================
backfill              1      fits now and ends in time: first, so a queue whose head blocks (a Batch or
                             SageMaker share) starts it before the head blocks, and Slurm's main
                             scheduler starts it on Osprey's predicted time, not only its declared limit
running               1      keeps its GPUs: a queued job needs more than the head's lift to preempt it
head                  0.75   above the rest of the queue, below the running jobs it waits for
none / yields         0.5    the rest of the queue; a yielding job drops to it, so only a job above the
                             queue (the head) may preempt it on Kueue
held                  0      would delay the head: after it
====================  =====  ==========================================================================

A job whose time is unknown (no progress, no declared limit) is never predicted to end: it can be neither a
backfill (it might never end) nor the reason for a head's start time. When no predicted start exists (the
head's GPUs are held by jobs with unknown ends) nothing is held: holding jobs for an unbounded time would only
idle GPUs.

Pure arithmetic, no clock and no AWS: the caller supplies ``remaining_s`` as of one instant.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from osprey_control.derivation.engine import CompiledPolicy

__all__ = [
    "NEUTRAL",
    "RESERVATION_NOTE",
    "PoolJob",
    "PoolSettings",
    "Reservation",
    "ReservationRole",
    "plan_reservations",
    "pool_settings",
    "reservation_of",
]

# The key of a job's ``JobMetrics.notes`` (and of its decision's ``inputs.notes``) that explains its role.
RESERVATION_NOTE = "reservation"


class ReservationRole(StrEnum):
    HEAD = "head"  # the job the pool's GPUs are kept for
    HELD = "held"  # fits now, but would end after the head's predicted start and take GPUs it needs
    BACKFILL = "backfill"  # fits now and is predicted to end before the head's start (or fits in the extra)
    RUNNING = "running"  # holds GPUs and keeps them
    YIELDS = "yields"  # running, young enough to be preempted for the head (``yieldFraction``)
    NONE = "none"  # starting now in order, or queued behind the head without fitting now


_VALUE = {
    ReservationRole.BACKFILL: 1.0,
    ReservationRole.RUNNING: 1.0,
    ReservationRole.HEAD: 0.75,
    ReservationRole.NONE: 0.5,
    ReservationRole.HELD: 0.0,
    ReservationRole.YIELDS: 0.5,
}
NEUTRAL = _VALUE[ReservationRole.NONE]


@dataclass(frozen=True, slots=True)
class PoolJob:
    """One job of a pool as the control plane sees it this cycle.

    ``remaining_s`` is the predicted time it still needs (the ``remaining_time`` signal), None when unknown;
    ``rank`` is the policy's order (higher first: the last derived priority); ``waited_s`` breaks ties (longest
    waiting first, as every backend's queue does by submission time).
    """

    key: Hashable
    gpus: int
    running: bool
    remaining_s: float | None
    rank: float = 0.0
    waited_s: float = 0.0
    held_s: float = 0.0  # a running job: seconds since it got its GPUs
    attempts: int = 1  # allocations so far (more than one: it was preempted or requeued before)
    may_yield: bool = False  # its policy lets a reservation mark it as yielding (``yieldFraction`` > 0)


@dataclass(frozen=True, slots=True)
class Reservation:
    """A job's part in its pool's reservation: its role, the signal value, and the head's predicted start."""

    role: ReservationRole
    head: Hashable | None = None
    head_start_in_s: float | None = None  # seconds from now until the head's GPUs are predicted free

    @property
    def value(self) -> float:
        return _VALUE[self.role]

    def describe(self) -> str:
        """One line for ``osprey explain``: why the job was lifted or held."""
        start = "unknown" if self.head_start_in_s is None else f"in {self.head_start_in_s / 60:.0f} min"
        if self.role is ReservationRole.HEAD:
            return f"reserved: next to run, its GPUs are predicted free {start}"
        if self.role is ReservationRole.HELD:
            return f"held for {self.head}: it would end after that job's predicted start ({start})"
        if self.role is ReservationRole.BACKFILL:
            return f"backfill: predicted to end before {self.head} starts ({start})"
        if self.role is ReservationRole.YIELDS:
            return f"yields to {self.head}: started recently, so the backend may preempt it to start that job now"
        if self.role is ReservationRole.RUNNING:
            return f"running: keeps its GPUs while {self.head} waits ({start})"
        return "no reservation affects this job" if self.head is None else f"queued behind {self.head}"


_UNAFFECTED = Reservation(ReservationRole.NONE)


def _predicted_end(job: PoolJob) -> tuple[float, int]:
    """(seconds until the job ends, its GPUs); a job whose time is unknown never ends."""
    return (math.inf if job.remaining_s is None else max(0.0, job.remaining_s), job.gpus)


def _predicted_start(free: int, ends: Sequence[tuple[float, int]], gpus: int) -> tuple[float, int] | None:
    """(seconds until ``gpus`` are free, GPUs free then beyond ``gpus``), or None when never predicted."""
    if free >= gpus:
        return 0.0, free - gpus
    for end_s, released in ends:
        if not math.isfinite(end_s):
            return None
        free += released
        if free >= gpus:
            return end_s, free - gpus
    return None


def _cheap_victims(
    jobs: Sequence[PoolJob], needed: int, start_s: float, yield_fraction: float
) -> set[Hashable]:
    """Running jobs whose preemption would let the head start now at little cost, else none.

    A job is cheap to preempt when it may yield (its policy opted in), has held its GPUs for at most
    ``yield_fraction`` of the head's predicted wait, and is on its first attempt, so no job is preempted twice
    for a reservation. The youngest go first, and only as many as the head needs: all or none.
    """
    if yield_fraction <= 0:
        return set()
    young = sorted(
        (
            job
            for job in jobs
            if job.running and job.may_yield and job.attempts <= 1 and job.held_s <= yield_fraction * start_s
        ),
        key=lambda job: job.held_s,
    )
    chosen: set[Hashable] = set()
    for job in young:
        if needed <= 0:
            break
        chosen.add(job.key)
        needed -= job.gpus
    return chosen if needed <= 0 else set()


def plan_reservations(
    jobs: Sequence[PoolJob], capacity_gpus: int | None, *, yield_fraction: float = 0.0
) -> dict[Hashable, Reservation]:
    """Each job's :class:`Reservation` in one pool of ``capacity_gpus`` GPUs (module docstring).

    Without a known capacity the pool is taken to be full (nothing free now): the head is then the first queued
    job, its start the predicted ends of the running jobs, and nothing is held (nothing fits now). With
    ``yield_fraction`` > 0, young running jobs that together free the head's GPUs now yield to it (the head's
    predicted start is then now).
    """
    held_gpus = sum(job.gpus for job in jobs if job.running)
    free = 0 if capacity_gpus is None else max(0, capacity_gpus - held_gpus)
    ends = [_predicted_end(job) for job in jobs if job.running]
    queued = sorted(
        (job for job in jobs if not job.running), key=lambda job: (-job.rank, -job.waited_s, str(job.key))
    )
    plan: dict[Hashable, Reservation] = {}
    head: PoolJob | None = None
    position = 0
    for position, job in enumerate(queued):  # noqa: B007 - the head's position is used below
        if job.gpus <= free:  # starts now, in order
            free -= job.gpus
            ends.append(_predicted_end(job))
            continue
        head = job
        break
    if head is None:
        return plan
    start = _predicted_start(free, sorted(ends, key=lambda end: end[0]), head.gpus)
    if start is None:
        return plan
    start_s, extra = start
    plan[head.key] = Reservation(ReservationRole.HEAD, head.key, start_s)
    yielding = _cheap_victims(jobs, head.gpus - free, start_s, yield_fraction)
    for job in jobs:
        if job.running:
            role = ReservationRole.YIELDS if job.key in yielding else ReservationRole.RUNNING
            plan[job.key] = Reservation(role, head.key, 0.0 if yielding else start_s)
    if yielding:
        plan[head.key] = Reservation(ReservationRole.HEAD, head.key, 0.0)
        return plan
    for job in queued[position + 1 :]:
        if job.gpus > free:
            continue  # cannot start now: the backend keeps it behind the head anyway
        ends_before = job.remaining_s is not None and job.remaining_s <= start_s
        if ends_before or job.gpus <= extra:
            free -= job.gpus
            if not ends_before:
                extra -= job.gpus
            plan[job.key] = Reservation(ReservationRole.BACKFILL, head.key, start_s)
        elif job.remaining_s is None:
            # Nothing says when it would end: holding it could idle its GPUs for nothing, starting it may delay
            # the head; it keeps its place in the queue (Slurm, too, reserves nothing for a job without a limit).
            plan[job.key] = Reservation(ReservationRole.NONE, head.key, start_s)
        else:
            plan[job.key] = Reservation(ReservationRole.HELD, head.key, start_s)
    return plan


def reservation_of(plan: Mapping[Hashable, Reservation], key: Hashable) -> Reservation:
    """The job's reservation in ``plan`` (unaffected when the plan does not name it)."""
    return plan.get(key, _UNAFFECTED)


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """One pool's reservation settings, from the policies of its jobs that read the signal."""

    capacity_gpus: int | None
    yield_fraction: float


def pool_settings(policies: Iterable[CompiledPolicy]) -> PoolSettings | None:
    """The settings of a pool whose jobs have ``policies``; None when none of them reads the signal.

    Several policies may share a pool: the capacity is the largest any of them declares (each declares the same
    pool's GPUs, so they differ only by mistake, and the larger never hides free GPUs), and the yield fraction
    is the largest, but only jobs of a policy with a fraction > 0 ever yield (``PoolJob.may_yield``).
    """
    reading = [policy for policy in policies if policy.reads_reservation]
    if not reading:
        return None
    capacities = [policy.capacity_gpus for policy in reading if policy.capacity_gpus is not None]
    return PoolSettings(
        capacity_gpus=max(capacities) if capacities else None,
        yield_fraction=max(policy.yield_fraction for policy in reading),
    )
