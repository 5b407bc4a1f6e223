"""The guard's lookahead: a pool run forward through its backend's own admission rule, for one order.

Each model is the admission rule of the simulator's model of that backend (``osprey.simulate``: ``kueue``,
``slurm``, ``fairshare`` and ``sagemaker-queue``), reduced to what decides *when* each job starts once
priorities are fixed: no startup delays, no gang watch, no metrics. ``tests/guard/test_forward.py`` holds each
one to the simulator's model on the same jobs (the same start times when run times are exact and there is no
startup delay), so what the guard predicts is what the simulator, and the scheduler it models, would do.

- ``kueue``: BestEffortFIFO (priority, then queue time; a workload that does not fit does not block others) and
  ``withinClusterQueue: LowerPriority`` preemption (the lowest priority, then the most recently admitted, only
  the victims needed; a victim keeps its queue position and loses the work since its last checkpoint).
- ``slurm``: priority then submission order; the main scheduler stops at the first job that cannot start;
  backfill gives each pending job in order the earliest window free for its whole *time limit* (what Slurm
  believes, not the predicted run time) and starts it only if that window is now.
- ``fairshare`` / ``sagemaker-queue``: AWS Batch fair share: the next job comes from the share (team) with the
  lowest decayed usage x weight; within a share by priority (``sagemaker-queue``: ``schedulingPriority``;
  ``fairshare``: Osprey's team x size-class shares, whose weights ``fold_weights`` nudges by at most 10 % by
  their best queued priority, approximated as one team share ordered by priority), then submission order; a
  share whose head does not fit waits, the others go on.

Placement is per node (best fit for a job of at most one node, whole free nodes for a gang), as the simulated
cluster places, so fragmentation that keeps a gang out in the simulator keeps it out here.

Pure arithmetic: no clock, no randomness, no AWS. Times are seconds from the cycle's instant.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from osprey_control.guard.free_profile import FreeProfile
from osprey_control.guard.pool_state import Nodes, OrderKey, RunQueue, VictimOrder

__all__ = ["ForwardOutcome", "LookJob", "LookPool", "Model", "run_forward"]


class Model(StrEnum):
    KUEUE = "kueue"
    SLURM = "slurm"
    FAIRSHARE = "fairshare"
    SAGEMAKER_QUEUE = "sagemaker-queue"


# Slurm's backfill looks at this many pending jobs per pass (``bf_max_job_test``'s default).
BF_MAX_JOB_TEST = 500
# backends.batch.team_shares.DEFAULT_ORDER_MARGIN: how far a share's best queued priority moves its weight.
_ORDER_MARGIN = 0.1


@dataclass(frozen=True, slots=True)
class LookJob:
    """One job of the pool as the lookahead sees it.

    ``remaining_s``: the time it still needs (a prediction; the samples scale it), None when unknown: it then
    never ends within the horizon. ``limit_s``: the time limit the backend itself enforces and plans with
    (Slurm's ``--time`` left), None when unlimited. ``waited_s``: a queued job's time since submission (its
    queue position), a running job's time since it got its GPUs. ``arrive_in_s`` > 0 for a predicted arrival.
    """

    key: Hashable
    gpus: int
    running: bool
    remaining_s: float | None
    limit_s: float | None = None
    waited_s: float = 0.0
    share: str = "default"
    utilization: float = 1.0
    arrive_in_s: float = 0.0
    age_s: float | None = None  # seconds since submission (what the recent arrival rate is read from)


@dataclass(frozen=True, slots=True)
class LookPool:
    """The pool: its GPUs (in nodes of ``node_gpus``), its jobs, and the backend settings the models read."""

    capacity_gpus: int
    jobs: Sequence[LookJob]
    node_gpus: int = 8
    checkpoint_s: float = 1800.0  # work a preempted job keeps is what it did before its last checkpoint
    share_decay_s: float = 3600.0
    share_usage: Mapping[str, float] = field(default_factory=dict)  # decayed GPUs per share, as of now
    share_weights: Mapping[str, float] = field(default_factory=dict)
    # What a job whose time is unknown is taken to need in all (None: it never ends within the horizon).
    unknown_runtime_s: float | None = None


@dataclass(frozen=True, slots=True)
class ForwardOutcome:
    """What one order is predicted to give over the horizon.

    ``mean_wait_s``: over the queued jobs and the predicted arrivals, from submission to start, a job still
    waiting at the horizon counted as waiting until it. ``goodput``: utilization-weighted GPU-seconds of
    training within the horizon, less the work preemption throws away, over the pool's GPU-seconds.
    """

    mean_wait_s: float
    goodput: float
    busy_fraction: float
    preemptions: int
    started: int
    waiting: int
    # Each job's (first) start, seconds from now, for those that started within the horizon.
    starts: Mapping[Hashable, float] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class _Run:
    index: int
    job: LookJob
    priority: float
    submit_s: float  # queue position: seconds from now (negative: submitted before now)
    remaining_s: float  # inf when unknown
    limit_s: float  # inf when unlimited
    started_s: float | None = None
    valid_s: float = 0.0  # when ``remaining_s`` was last true: now for a job already running, else its start
    parts: list[tuple[int, int]] = field(default_factory=list)
    version: int = 0
    wait_s: float | None = None
    queue_key: OrderKey = (0.0, 0.0, 0)  # its place in the queue while queued
    victim_key: OrderKey = (0.0, 0.0, 0)  # its place among Kueue's victims while running


class _Forward:
    def __init__(
        self,
        model: Model,
        pool: LookPool,
        priority: Mapping[Hashable, float],
        default: float,
        horizon: float,
        *,
        once_running: Mapping[Hashable, float] | None = None,
        arrival_once_running: float | None = None,
    ) -> None:
        self.model = model
        self.arrival_once_running = arrival_once_running
        # A job's priority from its start on, where the order lifts a job that holds GPUs (default: unchanged).
        self.once_running = once_running or {}
        self.pool = pool
        self.horizon = horizon
        self.nodes = Nodes(pool.capacity_gpus, pool.node_gpus)
        self.queue: dict[int, _Run] = {}
        self.order: RunQueue[_Run] = RunQueue()
        # Batch's fair share picks a share, then its first job: each share's queue in the same order.
        self.share_order: dict[str, RunQueue[_Run]] = {}
        self.queued_sizes: Counter[int] = Counter()
        self.victims: VictimOrder[_Run] = VictimOrder()
        self.running: dict[int, _Run] = {}
        self.events: list[tuple[float, int, int, int]] = []  # (time, kind 0 end / 1 arrival, index, version)
        self.busy = 0.0
        self.wasted = 0.0
        self.preemptions = 0
        self.waits: list[float] = []
        self.usage = {
            share: (float(u), 0.0) for share, u in pool.share_usage.items()
        }  # share -> (decayed, at)
        self.share_gpus: dict[str, int] = {}
        self.runs: list[_Run] = []
        for index, job in enumerate(pool.jobs):
            remaining = self._remaining(job)
            limit = math.inf if job.limit_s is None else max(0.0, job.limit_s)
            submit = job.arrive_in_s if job.arrive_in_s > 0 else -job.waited_s
            run = _Run(index, job, priority.get(job.key, default), submit, remaining, limit)
            self.runs.append(run)
            if job.running:
                run.started_s = -job.waited_s
                run.parts = self.nodes.force(job.gpus)
                self._hold(run)
                self._share_change(job.share, job.gpus, 0.0)
                self._schedule_end(run, 0.0)
            elif job.arrive_in_s > 0:
                heapq.heappush(self.events, (job.arrive_in_s, 1, index, 0))
            else:
                self._enqueue(run)

    def _remaining(self, job: LookJob) -> float:
        if job.remaining_s is not None:
            return max(0.0, job.remaining_s)
        prior = self.pool.unknown_runtime_s
        if prior is None:
            return math.inf
        if not job.running:
            return prior
        # Running for longer than the usual job already: it is taken to have a quarter of that still to go.
        return max(prior - job.waited_s, 0.25 * prior)

    # -- the loop --------------------------------------------------------------------------------------
    def run(self) -> ForwardOutcome:
        now = 0.0
        self._pass(now)
        while self.events and self.events[0][0] <= self.horizon:
            now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                _, kind, index, version = heapq.heappop(self.events)
                run = self.runs[index]
                if run.version != version:
                    continue
                if kind == 0:
                    self._finish(run, now)
                else:
                    self._enqueue(run)
            self._pass(now)
        for run in self.running.values():
            self._account(run, self.horizon)
        waiting = 0
        for run in self.queue.values():
            waiting += 1
            self.waits.append(self.horizon - run.submit_s)
        capacity_s = self.pool.capacity_gpus * self.horizon
        mean_wait = math.fsum(self.waits) / len(self.waits) if self.waits else 0.0
        goodput = (self.busy - self.wasted) / capacity_s if capacity_s > 0 else 0.0
        busy = self.busy / capacity_s if capacity_s > 0 else 0.0
        starts = {run.job.key: run.submit_s + run.wait_s for run in self.runs if run.wait_s is not None}
        return ForwardOutcome(
            mean_wait, goodput, busy, self.preemptions, len(self.waits) - waiting, waiting, starts
        )

    def _schedule_end(self, run: _Run, now: float) -> None:
        if math.isfinite(run.remaining_s):
            heapq.heappush(self.events, (now + run.remaining_s, 0, run.index, run.version))

    def _account(self, run: _Run, until: float) -> None:
        assert run.started_s is not None
        since = max(0.0, run.started_s)
        held = max(0.0, min(until, self.horizon) - since)
        self.busy += held * run.job.gpus * run.job.utilization

    def _finish(self, run: _Run, now: float) -> None:
        self._account(run, now)
        self.nodes.release(run.parts)
        self._unhold(run)
        self._share_change(run.job.share, -run.job.gpus, now)
        run.version += 1

    def _hold(self, run: _Run) -> None:
        self.running[run.index] = run
        if self.model is Model.KUEUE:
            run.victim_key = (run.priority, -(run.started_s or 0.0), -run.index)
            self.victims.add(run.victim_key, run, run.job.gpus)

    def _unhold(self, run: _Run) -> None:
        del self.running[run.index]
        if self.model is Model.KUEUE:
            self.victims.remove(run.victim_key)

    def _enqueue(self, run: _Run) -> None:
        self.queue[run.index] = run
        run.queue_key = (-run.priority, run.submit_s, run.index)
        self.order.add(run.queue_key, run)
        if self.model in (Model.FAIRSHARE, Model.SAGEMAKER_QUEUE):
            self.share_order.setdefault(run.job.share, RunQueue()).add(run.queue_key, run)
        self.queued_sizes[run.job.gpus] += 1

    def _dequeue(self, run: _Run) -> None:
        del self.queue[run.index]
        self.order.remove(run.queue_key)
        if self.model in (Model.FAIRSHARE, Model.SAGEMAKER_QUEUE):
            self.share_order[run.job.share].remove(run.queue_key)
        self.queued_sizes[run.job.gpus] -= 1
        if not self.queued_sizes[run.job.gpus]:
            del self.queued_sizes[run.job.gpus]

    def _start(self, run: _Run, parts: list[tuple[int, int]], now: float) -> None:
        self._dequeue(run)
        run.parts = parts
        run.started_s = now
        run.valid_s = now
        lifted = self.arrival_once_running if run.job.arrive_in_s > 0 else None
        run.priority = self.once_running.get(run.job.key, run.priority if lifted is None else lifted)
        if run.wait_s is None:
            run.wait_s = now - run.submit_s
            self.waits.append(run.wait_s)
        self._hold(run)
        self._share_change(run.job.share, run.job.gpus, now)
        self._schedule_end(run, now)

    def _evict(self, run: _Run, now: float) -> None:
        assert run.started_s is not None
        elapsed = now - run.started_s
        checkpoint = self.pool.checkpoint_s
        kept = (elapsed // checkpoint) * checkpoint if checkpoint > 0 else 0.0
        # The lost work is charged whole, even the part done before now: it is done again inside the horizon,
        # where it counts as busy, and redoing work is not goodput.
        self.wasted += (elapsed - kept) * run.job.gpus * run.job.utilization
        self._account(run, now)
        # What it did since its last checkpoint must be done again.
        run.remaining_s += (now - run.started_s - kept) - (now - run.valid_s)
        self.nodes.release(run.parts)
        self._unhold(run)
        self._share_change(run.job.share, -run.job.gpus, now)
        run.version += 1
        run.started_s = None
        self._enqueue(run)
        self.preemptions += 1

    # -- shares (Batch fair share) ---------------------------------------------------------------------
    def _share_usage(self, share: str, now: float) -> float:
        decayed, at = self.usage.get(share, (0.0, 0.0))
        gpus = self.share_gpus.get(share, 0)
        decay = self.pool.share_decay_s
        if decay <= 0:
            return float(gpus)
        factor = math.exp(-(now - at) / decay)
        return decayed * factor + gpus * (1.0 - factor)

    def _share_change(self, share: str, delta: int, now: float) -> None:
        if self.model not in (Model.FAIRSHARE, Model.SAGEMAKER_QUEUE):
            return
        self.usage[share] = (self._share_usage(share, now), now)
        self.share_gpus[share] = self.share_gpus.get(share, 0) + delta

    # -- one scheduling pass per backend ----------------------------------------------------------------
    def _pass(self, now: float) -> None:
        if not self.queue:
            return
        if self.model is Model.KUEUE:
            self._kueue(now)
        elif self.model is Model.SLURM:
            self._slurm(now)
        else:
            self._shares(now)

    def _kueue(self, now: float) -> None:
        smallest = min(self.queued_sizes)
        # Running jobs by priority with their GPUs summed: whether a queued job could preempt its way in is a
        # bisection, not a scan. A job started in this pass is never a victim later in it (the later jobs rank no
        # higher), so only a preemption makes it stale.
        ranked = self._ranked()
        # The fewest GPUs a job of this pass could neither get nor preempt its way to. A later job ranks no
        # higher, so it has no more victims, and a start since only took GPUs: one as large fails the same way
        # and is not tried again. A preemption may free more than it needed, so it clears this.
        refused = math.inf
        for run in self.order.in_order():
            gpus = run.job.gpus
            if gpus >= refused or run.index not in self.queue:
                continue
            parts = self.nodes.place(gpus) if gpus <= self.nodes.total_free else None
            if parts is not None:
                self._start(run, parts, now)
                continue
            priorities, below, victims = ranked
            lower = bisect.bisect_left(priorities, run.priority)
            if below[lower] + self.nodes.total_free >= gpus and self._preempt_for(run, now, victims[:lower]):
                ranked = self._ranked()
                refused = math.inf
                continue
            if lower == 0 and self.nodes.total_free < smallest:
                return  # nothing fits and nothing behind it can preempt: the pass is over
            refused = gpus
            if refused <= min(self.queued_sizes, default=0):
                return  # every job still queued is at least as large as one refused

    def _ranked(self) -> tuple[list[float], list[int], list[_Run]]:
        """The running jobs in Kueue's victim order (lowest priority, then the most recently admitted), their
        priorities and the GPUs of each prefix."""
        return self.victims.snapshot()

    def _preempt_for(self, run: _Run, now: float, victims: list[_Run]) -> bool:
        if not victims:
            return False
        trial = self.nodes.trial()
        gpus = run.job.gpus
        chosen: list[_Run] = []
        for victim in victims:
            chosen.append(victim)
            if trial.release_fits(victim.parts, gpus):
                break
        else:
            return False
        # Kueue keeps every victim that turns out not to be needed, most important first: the chosen are a prefix
        # of the victim order, so that is the prefix reversed.
        kept: set[int] = set()
        for victim in reversed(chosen):
            trial.take(victim.parts)
            if trial.fits(gpus):
                kept.add(victim.index)
            else:
                trial.release(victim.parts)
        for victim in chosen:
            if victim.index not in kept:
                self._evict(victim, now)
        parts = self.nodes.place(run.job.gpus)
        if parts is None:  # cannot happen: the trial placed it on the same free GPUs
            return False
        self._start(run, parts, now)
        return True

    def _slurm(self, now: float) -> None:
        pending = self.order.in_order()
        for position, run in enumerate(pending):
            parts = self.nodes.place(run.job.gpus) if run.job.gpus <= self.nodes.total_free else None
            if parts is None:
                self._backfill(pending[position : position + BF_MAX_JOB_TEST], now)
                return
            self._start(run, parts, now)

    def _backfill(self, pending: list[_Run], now: float) -> None:
        profile = FreeProfile(
            now,
            self.nodes.total_free,
            (
                (run.started_s + run.limit_s, run.job.gpus)
                for run in self.running.values()
                if run.started_s is not None and math.isfinite(run.limit_s)
            ),
        )
        # From a job on, no later one smaller than the GPUs free now: none of them can start in this pass, and
        # the reservations they would take only matter to jobs behind them, which cannot start either.
        smallest_from = [0] * len(pending)
        smallest = math.inf
        for position in range(len(pending) - 1, -1, -1):
            smallest = min(smallest, pending[position].job.gpus)
            smallest_from[position] = int(smallest)
        for position, run in enumerate(pending):
            if smallest_from[position] > self.nodes.total_free:
                return
            start = profile.earliest(run.job.gpus, run.limit_s)
            if start is None:
                continue
            if start <= now:
                parts = self.nodes.place(run.job.gpus)
                if parts is not None:
                    self._start(run, parts, now)
                    profile.take(now, run.limit_s, run.job.gpus)
                    continue
                start = profile.earliest(run.job.gpus, run.limit_s, after=now)
                if start is None:
                    continue
            profile.take(start, run.limit_s, run.job.gpus)

    def _shares(self, now: float) -> None:
        ready = [
            (self._share_key(share, queue.first(), now), share)
            for share, queue in self.share_order.items()
            if queue
        ]
        heapq.heapify(ready)
        while ready and self.nodes.total_free > 0:
            _, share = heapq.heappop(ready)
            queue = self.share_order[share]
            run = queue.first()
            parts = self.nodes.place(run.job.gpus) if run.job.gpus <= self.nodes.total_free else None
            if parts is None:
                continue  # the share's head does not fit: that share waits
            self._start(run, parts, now)
            if queue:
                heapq.heappush(ready, (self._share_key(share, queue.first(), now), share))

    def _share_key(self, share: str, head: _Run, now: float) -> float:
        weighted = self._share_usage(share, now) * self.pool.share_weights.get(share, 1.0)
        if self.model is Model.FAIRSHARE:
            # Osprey's team x size-class shares (backends.batch.fold_weights): a team's usage x weight, times
            # 1 + 10 % of how far its best queued priority is below the top, so within a team the class holding
            # the highest priority goes first and across teams usage still decides.
            weighted *= 1.0 + _ORDER_MARGIN * (100.0 - min(100.0, max(0.0, head.priority))) / 100.0
        return weighted


def run_forward(
    model: Model | str,
    pool: LookPool,
    priority: Mapping[Hashable, float],
    *,
    horizon_s: float,
    default_priority: float = 0.0,
    once_running: Mapping[Hashable, float] | None = None,
    arrival_once_running: float | None = None,
) -> ForwardOutcome:
    """Run ``pool`` forward for ``horizon_s`` under ``model``'s admission rule with each job's backend
    ``priority`` (higher first; a job not in it has ``default_priority``), and, for a job that starts within the
    horizon, its priority ``once_running`` from then on (a policy lifts a job that holds GPUs, which is what keeps
    Kueue from preempting it; unchanged when not given), a predicted arrival's ``arrival_once_running``."""
    if not horizon_s > 0:
        raise ValueError(f"horizon_s must be > 0 seconds, got {horizon_s}")
    return _Forward(
        Model(model),
        pool,
        priority,
        default_priority,
        horizon_s,
        once_running=once_running,
        arrival_once_running=arrival_once_running,
    ).run()
