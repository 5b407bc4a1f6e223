"""The discrete-event loop: arrivals, placements, worker startup, training, completion, eviction.

Schedulers decide *what* runs (:class:`Scheduler`); the simulator owns the physics: a job trains only once
every worker is placed and started, a preempted job loses the work since its last checkpoint, and every
GPU-second lands in the :class:`~osprey.simulate.ledger.Ledger`. Same workload, scheduler and seed:
same result (a heap ordered by time, event kind and sequence number; no wall clock, no unseeded randomness).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import ClassVar

from osprey.simulate.cluster import Allocation, SimulatedCluster
from osprey.simulate.ledger import Ledger
from osprey.simulate.model import Job, SimulationError, Workload
from osprey_control.derivation import AllocationInterval

__all__ = ["JobRun", "Scheduler", "Simulator", "Status"]

logger = logging.getLogger(__name__)


class Status(StrEnum):
    PENDING = "pending"  # not submitted yet
    QUEUED = "queued"  # eligible, not fully allocated (nogang may hold some workers already)
    HELD = "held"  # evicted and backing off before it may be admitted again
    STARTING = "starting"  # every worker placed, some still starting up
    TRAINING = "training"
    DONE = "done"
    FAILED = "failed"


class _Kind(IntEnum):
    # At one instant, releases come first so an arrival at the same time sees the freed GPUs.
    COMPLETE = 0
    TRAIN = 1
    RESUME = 2
    TIMER = 3
    ARRIVE = 4
    CYCLE = 5


@dataclass(slots=True, eq=False)
class JobRun:
    """One job's life in the simulation. Schedulers read it; only the simulator changes it."""

    index: int
    job: Job
    workers: int
    worker_gpus: int
    status: Status = Status.PENDING
    allocation: Allocation = field(default_factory=list)
    placed_at: list[float] = field(default_factory=list)
    ready_at: list[float] = field(default_factory=list)
    attempt: int = 0  # full allocations so far; each one draws fresh startup delays
    work_done_s: float = 0.0  # checkpointed training progress
    train_started_s: float | None = None
    allocated_s: float | None = None
    queued_since_s: float | None = None
    queued_s: float = 0.0  # total time not fully allocated (the queueing delay)
    queue_key_s: float = 0.0  # position in a time-ordered queue (Kueue re-queues by eviction time)
    first_train_s: float | None = None
    end_s: float | None = None
    version: int = 0
    priority: int | None = None  # Osprey's applied priority
    # Every allocation from its first worker up to its release (start, end, GPUs): what the registry
    # records for attained_service.
    intervals: list[AllocationInterval] = field(default_factory=list)
    priority_changes: int = 0
    preemptions: int = 0
    requeues: int = 0

    @property
    def remaining_s(self) -> float:
        return self.job.duration_s - self.work_done_s

    @property
    def unplaced_gpus(self) -> int:
        return (self.workers - len(self.placed_at)) * self.worker_gpus

    def ready_workers(self, now: float) -> int:
        return sum(1 for t in self.ready_at if t <= now)


class Scheduler:
    """Base class. ``schedule`` is called after every instant at which something changed."""

    name: ClassVar[str] = "base"
    cycle_s: float | None = None  # call on_cycle every cycle_s (Osprey's derivation interval)
    sim: Simulator

    def bind(self, sim: Simulator) -> None:
        self.sim = sim

    def schedule(self, now: float) -> None:
        raise NotImplementedError

    def on_arrival(self, run: JobRun, now: float) -> None:
        """A job was submitted (it is queued)."""

    def on_allocated(self, run: JobRun, now: float) -> None:
        """Every worker of ``run`` is placed; its workers are starting."""

    def on_finished(self, run: JobRun, now: float) -> None:
        """``run`` completed, failed or was evicted (its GPUs are free again)."""

    def on_timer(self, run: JobRun, tag: str, now: float) -> None:
        """A timer set with :meth:`Simulator.set_timer` fired (and ``run`` was not evicted since)."""

    def on_cycle(self, now: float) -> None:
        """A derivation cycle."""


class Simulator:
    def __init__(self, workload: Workload, scheduler: Scheduler, *, seed: int = 0) -> None:
        workload.validate()
        if workload.tenants is not None:
            workload.tenants.check(workload)
        self.workload = workload
        self.seed = seed
        self.cluster = SimulatedCluster(workload.node_gpus)
        self.ledger = Ledger(workload.total_gpus, workload.start_s, workload.horizon_s, workload.tenants)
        node = self.cluster.node_size
        self.runs = [
            JobRun(i, job, job.workers(node), job.worker_gpus(node)) for i, job in enumerate(workload.jobs)
        ]
        self.queue: dict[int, JobRun] = {}  # QUEUED runs, in the order they (re-)entered the queue
        self.running: dict[int, JobRun] = {}  # STARTING and TRAINING runs
        self.held: dict[int, JobRun] = {}  # HELD runs (backing off)
        self.preemptions = 0
        self.scheduler = scheduler
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._timers: dict[int, str] = {}
        self._seq = 0
        self._dirty = False
        self._finished = 0
        self._arrived = 0
        scheduler.bind(self)

    # -- the loop ---------------------------------------------------------------------------------------
    def run(self, on_progress: Callable[[int, int], None] | None = None) -> None:
        for run in self.runs:
            self._push(run.job.submit_s, _Kind.ARRIVE, run)
        cycle = self.scheduler.cycle_s
        if cycle is not None and self.runs:
            self._push(self.workload.start_s, _Kind.CYCLE, None)
        total = len(self.runs)
        while self._heap and self._finished < total:
            now = self._heap[0][0]
            self.ledger.advance(now)
            while self._heap and self._heap[0][0] == now:
                self._handle(*heapq.heappop(self._heap))
            if self._dirty:
                self._dirty = False
                self.scheduler.schedule(now)
                self._check_progress(now)
            self.ledger.sample()
            if on_progress is not None:
                on_progress(self._finished, total)
        logger.debug("simulation done", extra={"scheduler": self.scheduler.name, "jobs": total})

    def _check_progress(self, now: float) -> None:
        # Nothing running, nothing backing off, nothing left to arrive, an empty cluster and still a queue:
        # the scheduler will never place anything again. Fail loudly rather than spin on cycles.
        # A pending timer may still let the scheduler act (Slurm's next scheduling pass).
        stuck = (
            self.queue
            and not self.running
            and not self.held
            and not self._timers
            and self._arrived == len(self.runs)
        )
        if stuck and self.cluster.free_total == self.cluster.total:
            raise SimulationError(f"{self.scheduler.name}: queued jobs can never be placed (t={now:.0f})")

    def _push(self, at: float, kind: _Kind, run: JobRun | None, tag: str | None = None) -> None:
        self._seq += 1
        if tag is not None:
            self._timers[self._seq] = tag
        index, version = (-1, 0) if run is None else (run.index, run.version)
        heapq.heappush(self._heap, (at, int(kind), self._seq, index, version))

    def _handle(self, now: float, kind: int, seq: int, index: int, version: int) -> None:
        if kind == _Kind.CYCLE:
            self.scheduler.on_cycle(now)
            assert self.scheduler.cycle_s is not None
            self._push(now + self.scheduler.cycle_s, _Kind.CYCLE, None)
            return
        run = self.runs[index]
        tag = self._timers.pop(seq, None)
        if version != run.version:
            return  # the run was evicted or finished since this event was scheduled
        if kind == _Kind.ARRIVE:
            self._arrived += 1
            self.ledger.teams.demand(run.job.share, run.job.gpus)
            self.ledger.teams.submitted(run.index, run.job.share, run.job.gpus, now)
            self._enqueue(run, now)
            self.scheduler.on_arrival(run, now)
        elif kind == _Kind.TRAIN:
            self._start_training(run, now)
        elif kind == _Kind.COMPLETE:
            run.work_done_s = run.job.duration_s
            self._stop_training(run, now)
            self._release(run, now)
            self._end(run, now, Status.DONE)
        elif kind == _Kind.RESUME:
            del self.held[run.index]
            self.ledger.queued_jobs -= 1  # _enqueue counts it again
            self.ledger.teams.queued(run.job.share, -1)
            self.ledger.waiting_demand -= run.unplaced_gpus
            self._enqueue(run, now, keep_wait=True)
        elif kind == _Kind.TIMER and tag is not None:
            self.scheduler.on_timer(run, tag, now)

    # -- what schedulers call ---------------------------------------------------------------------------
    def mark_changed(self) -> None:
        """Ask for a scheduling pass at the end of this instant (e.g. after priorities changed)."""
        self._dirty = True

    def set_timer(self, run: JobRun, at: float, tag: str) -> None:
        self._push(at, _Kind.TIMER, run, tag)

    def allocate(self, run: JobRun, now: float) -> bool:
        """Place every remaining worker of a queued job at once (gang admission), or nothing."""
        if run.status is not Status.QUEUED:
            raise ValueError(f"job {run.job.job_id} is {run.status}, not queued")
        allocation = self.cluster.place(run.unplaced_gpus)
        if allocation is None:
            return False
        self._take(run, allocation, now)
        self._fully_allocated(run, now)
        return True

    def place_worker(self, run: JobRun, now: float) -> bool:
        """Place one more worker of a queued job (no gang: pods bind one by one)."""
        if run.status is not Status.QUEUED or not run.unplaced_gpus:
            return False
        allocation = self.cluster.place(run.worker_gpus)
        if allocation is None:
            return False
        self._take(run, allocation, now)
        if not run.unplaced_gpus:
            self._fully_allocated(run, now)
        return True

    def evict(self, run: JobRun, now: float, *, hold_until: float | None = None, preempted: bool) -> None:
        """Take a job's GPUs back and queue it again (now, or after a back-off ending at ``hold_until``)."""
        if run.status not in (Status.STARTING, Status.TRAINING):
            raise ValueError(f"job {run.job.job_id} is {run.status}, not running")
        if run.status is Status.TRAINING and run.train_started_s is not None:
            elapsed = now - run.train_started_s
            checkpoint = run.job.checkpoint_s
            kept = (elapsed // checkpoint) * checkpoint if checkpoint > 0 else 0.0
            run.work_done_s += kept
            self.ledger.waste(run.job.gpus, elapsed - kept, run.job.utilization)
            self._stop_training(run, now)
        self._release(run, now)
        del self.running[run.index]
        run.version += 1
        run.allocated_s = None
        if preempted:
            run.preemptions += 1
            self.preemptions += 1
        else:
            run.requeues += 1
        self.scheduler.on_finished(run, now)
        if hold_until is None or hold_until <= now:
            self._enqueue(run, now)
        else:
            run.status = Status.HELD
            run.queued_since_s = now
            self.held[run.index] = run
            self.ledger.queued_jobs += 1
            self.ledger.teams.queued(run.job.share, 1)
            self.ledger.waiting_demand += run.unplaced_gpus
            self._push(hold_until, _Kind.RESUME, run)
        self._dirty = True

    def fail(self, run: JobRun, now: float) -> None:
        """Stop a running job for good (gang fallback ``fail``)."""
        if run.status is Status.TRAINING:
            self._stop_training(run, now)
        self._release(run, now)
        self._end(run, now, Status.FAILED)

    # -- internals --------------------------------------------------------------------------------------
    def _enqueue(self, run: JobRun, now: float, *, keep_wait: bool = False) -> None:
        run.status = Status.QUEUED
        if not keep_wait or run.queued_since_s is None:
            run.queued_since_s = now
        self.queue[run.index] = run
        self.ledger.queued_jobs += 1
        self.ledger.teams.queued(run.job.share, 1)
        self.ledger.waiting_demand += run.unplaced_gpus
        self._dirty = True

    def _take(self, run: JobRun, allocation: Allocation, now: float) -> None:
        run.allocation.extend(allocation)
        gpus = sum(g for _, g in allocation)
        run.placed_at.extend([now] * (gpus // run.worker_gpus))
        self.ledger.allocated += gpus
        self.ledger.teams.allocated(run.job.share, gpus)
        self.ledger.waiting_demand -= gpus

    def _fully_allocated(self, run: JobRun, now: float) -> None:
        del self.queue[run.index]
        self.ledger.queued_jobs -= 1
        self.ledger.teams.queued(run.job.share, -1)
        if run.queued_since_s is not None:
            run.queued_s += now - run.queued_since_s
            run.queued_since_s = None
        run.status = Status.STARTING
        run.allocated_s = now
        run.attempt += 1
        self.ledger.teams.admitted(run.index, now)
        self.running[run.index] = run
        delays = self.workload.startup.delays(self.seed, run.job.job_id, run.attempt, run.workers)
        run.ready_at = [placed + delay for placed, delay in zip(run.placed_at, delays, strict=True)]
        # The registry counts a job as holding GPUs from RUNNING on (its first worker up: a Ready pod, a
        # running container), not from placement: the interval starts there (seconds() is 0 before it).
        run.intervals.append(AllocationInterval(min(run.ready_at), None, run.job.gpus))
        self._push(max(*run.ready_at, now), _Kind.TRAIN, run)
        self.scheduler.on_allocated(run, now)

    def _start_training(self, run: JobRun, now: float) -> None:
        run.status = Status.TRAINING
        run.train_started_s = now
        if run.first_train_s is None:
            run.first_train_s = now
        self.ledger.training += run.job.gpus
        self.ledger.training_util += run.job.gpus * run.job.utilization
        self._push(now + run.remaining_s, _Kind.COMPLETE, run)

    def _stop_training(self, run: JobRun, now: float) -> None:
        self.ledger.training -= run.job.gpus
        self.ledger.training_util -= run.job.gpus * run.job.utilization
        run.train_started_s = None

    def _release(self, run: JobRun, now: float) -> None:
        if run.intervals and run.intervals[-1].end_s is None:
            last = run.intervals[-1]
            run.intervals[-1] = AllocationInterval(last.start_s, now, last.gpus)
        gpus = sum(g for _, g in run.allocation)
        self.cluster.release(run.allocation)
        self.ledger.allocated -= gpus
        self.ledger.teams.allocated(run.job.share, -gpus)
        run.allocation = []
        run.placed_at = []
        run.ready_at = []

    def _end(self, run: JobRun, now: float, status: Status) -> None:
        self.running.pop(run.index, None)
        run.status = status
        run.end_s = now
        run.version += 1
        self.ledger.teams.demand(run.job.share, -run.job.gpus)
        self._finished += 1
        self.scheduler.on_finished(run, now)
        self._dirty = True

    def active(self) -> list[JobRun]:
        """Submitted and not finished: queued, backing off, starting or training (in index order)."""
        runs = [*self.queue.values(), *self.held.values(), *self.running.values()]
        runs.sort(key=lambda run: run.index)
        return runs
