"""Slurm's scheduling of one partition (AWS ParallelCluster's defaults), and Osprey layered on it.

What is modelled (slurm.conf, sched/backfill, priority/multifactor documentation, schedmd.com):

- **Priority order.** Pending jobs are considered by priority, then submission time, then job id.
  ParallelCluster's slurm.conf sets no ``PriorityType`` weights, so without Osprey every job has the same
  priority (:data:`NATIVE_PRIORITY`): submission order, as ``docs/slurm.md`` describes native Slurm.
- **The main scheduler** starts jobs in that order and stops at the first one that cannot start: nothing
  behind it starts ahead of it from this pass (``sched/backfill``'s main loop, like ``sched/builtin``).
- **Backfill** (``sched/backfill``, the ParallelCluster default) then walks the pending jobs in priority order
  (at most ``bf_max_job_test``, 500). Each gets the earliest time its GPUs are free for its whole time
  limit, counting running jobs as ending at start + time limit and the reservations of the jobs before it; a
  job whose earliest time is now starts, any other keeps its reservation, so a lower-priority job starts only
  if it delays no higher-priority one. The time limit is the job's declared runtime
  (``Job.declared_runtime_s``, ``--time``); without one it is the partition's ``MaxTime``, unlimited: such a
  job never ends as far as backfill knows, and starts only where nothing reserved is delayed for ever.
  ``bf_window`` (``Slurm(bf_window_s=...)``): a job whose earliest window starts further out gets no
  reservation, so jobs behind it may take its GPUs. Unbounded by default; Slurm's own default, a day, changes
  the LLM workload's and the trace's figures by little (docs/slurm.md, "Backfill settings").
- **Time limits are enforced**: a job still running at start + limit ends ``TIMEOUT`` (failed), as slurmctld
  ends it.
- **No preemption** (``PreemptType=preempt/none``, the default) and all of a job's nodes at once (a Slurm
  allocation is all-or-nothing).

With Osprey (``slurm+osprey``) the model is unchanged; each job's priority is what the production Slurm
applier writes through slurmrestd, :meth:`osprey_control.backends.slurm.applier.SlurmPriorityRange.map` of the applied
priority (an explicit priority, which Slurm stops recomputing, as in production). Until Osprey's first write a
job has the priority it was submitted with, ``base_priority``: by default what the documented deployment gives
it, Osprey's ``job_submit.lua`` (docs/slurm.md), which creates every opted-in job at
``SlurmPriorityRange.start``, the middle of the range (the simulator's jobs carry no ``initial-priority``).
``base_priority=1`` models a cluster without the plugin (ParallelCluster's bare slurm.conf): a newly submitted
job then waits behind every job Osprey has ranked until its first cycle.

Generous to Slurm: the backfill pass runs at every event (real Slurm runs it every ``bf_interval``, 30 s by
default). With ``sched_interval_s`` a newly submitted job is first considered at the next multiple of it (the
real slurmctld starts a batch job at its next periodic pass, not at submission; with Osprey, its cycle may rank
the job before that pass); unset, at once. GPUs are counted cluster-wide for reservations (``select/cons_tres`` places whole nodes for a
multi-node job); the physical fit is checked when a job starts.
"""

from __future__ import annotations

import math
from typing import ClassVar

from osprey.simulate.control import OspreyControl
from osprey.simulate.guard import SimulatedGuard
from osprey.simulate.layered import Layered
from osprey.simulate.sim import JobRun, Scheduler
from osprey_control.backends.slurm import DEFAULT_SLURM_PRIORITY_RANGE, SlurmPriorityRange
from osprey_control.guard import FreeProfile, Model
from osprey_control.policy import PriorityDerivationPolicy
from osprey_control.registry import Backend

__all__ = ["Slurm", "SlurmOsprey"]

# slurm.conf SchedulerParameters=bf_max_job_test: pending jobs backfill considers per pass (Slurm's default).
BF_MAX_JOB_TEST = 500
# Every job's priority with no priority weights configured (the lowest that is not "held").
NATIVE_PRIORITY = 1
TIMEOUT = "timeout"
PASS = "slurm-pass"


class Slurm(Scheduler):
    name: ClassVar[str] = "slurm"

    def __init__(
        self,
        *,
        backfill: bool = True,
        max_job_test: int = BF_MAX_JOB_TEST,
        bf_window_s: float = math.inf,
        sched_interval_s: float | None = None,
    ) -> None:
        self.backfill = backfill
        self.max_job_test = max_job_test
        self.bf_window_s = bf_window_s
        if sched_interval_s is not None and not sched_interval_s > 0:
            raise ValueError(f"sched_interval_s: must be > 0 seconds (or None), got {sched_interval_s}")
        self.sched_interval_s = sched_interval_s

    def first_pass(self, run: JobRun) -> float:
        """When slurmctld first considers ``run``: on arrival, or with ``sched_interval_s`` at the next periodic
        pass (slurm.conf ``sched_interval``/``bf_interval``: a submitted batch job waits for it)."""
        interval = self.sched_interval_s
        if interval is None:
            return run.job.submit_s
        return math.floor(run.job.submit_s / interval + 1.0) * interval

    def on_arrival(self, run: JobRun, now: float) -> None:
        super().on_arrival(run, now)
        if self.sched_interval_s is not None:
            self.sim.set_timer(run, self.first_pass(run), PASS)

    def priority(self, run: JobRun) -> int:
        """The job's Slurm priority: the same for every job without priority weights."""
        return NATIVE_PRIORITY

    def on_allocated(self, run: JobRun, now: float) -> None:
        limit = self.time_limit(run)
        if math.isfinite(limit):
            self.sim.set_timer(run, now + limit, TIMEOUT)

    def on_timer(self, run: JobRun, tag: str, now: float) -> None:
        if tag == TIMEOUT and run.index in self.sim.running:
            self.sim.fail(run, now)  # state TIMEOUT: slurmctld ends the job at its limit
        elif tag == PASS:
            self.sim.mark_changed()  # the pass that first sees the job

    @staticmethod
    def time_limit(run: JobRun) -> float:
        """``--time``: the declared runtime; unlimited (the partition's MaxTime) without one."""
        declared = run.job.declared_runtime_s
        return math.inf if declared is None else declared

    def schedule(self, now: float) -> None:
        sim = self.sim
        priority = self.priority
        pending = sorted(
            (run for run in sim.queue.values() if self.first_pass(run) <= now),
            key=lambda run: (-priority(run), run.job.submit_s, run.index),
        )
        for position, run in enumerate(pending):
            if not sim.allocate(run, now):
                if self.backfill:
                    self._backfill(pending[position : position + self.max_job_test], now)
                return

    def _end_by_limit(self, run: JobRun) -> float:
        assert run.allocated_s is not None  # a running job was allocated
        return run.allocated_s + self.time_limit(run)

    def _backfill(self, pending: list[JobRun], now: float) -> None:
        sim = self.sim
        free = FreeProfile(
            now,
            sim.cluster.free_total,
            ((self._end_by_limit(run), run.job.gpus) for run in sim.running.values()),
        )
        for run in pending:
            if sim.cluster.free_total == 0:
                return  # nothing can start now; later reservations change no start of this pass
            limit = self.time_limit(run)
            start = free.earliest(run.job.gpus, limit)
            if start is None or start - now > self.bf_window_s:
                continue  # never free for its whole limit (within bf_window): no reservation either
            if start <= now:
                if sim.allocate(run, now):
                    free.take(now, limit, run.job.gpus)
                    continue
                # Enough GPUs, not on nodes it can use: reserved from the next release on, when Slurm's
                # node-level view would see room (none known when every running job is unlimited).
                start = free.earliest(run.job.gpus, limit, after=now)
                if start is None or start - now > self.bf_window_s:
                    continue
            free.take(start, limit, run.job.gpus)


class SlurmOsprey(Layered, Slurm):
    name: ClassVar[str] = "slurm+osprey"

    def __init__(
        self,
        policy: PriorityDerivationPolicy,
        *,
        cycle_s: float | None = None,
        seed: int = 0,
        priority_range: SlurmPriorityRange = DEFAULT_SLURM_PRIORITY_RANGE,
        base_priority: int | None = None,
        sched_interval_s: float | None = None,
        guard: bool = True,
    ) -> None:
        super().__init__(sched_interval_s=sched_interval_s)
        self._layer(policy, cycle_s, seed, Backend.SLURM, guard)
        self.priority_range = priority_range
        # A job's Slurm priority until Osprey's first write: the middle of the range, where Osprey's
        # job_submit.lua creates it (None); 1 (NATIVE_PRIORITY) with ParallelCluster's bare slurm.conf.
        self.base_priority = priority_range.start if base_priority is None else base_priority

    def priority(self, run: JobRun) -> int:
        return self.written.get(run.index, self.base_priority)

    def make_guard(self, control: OspreyControl) -> SimulatedGuard:
        return SimulatedGuard(control.compiled, Model.SLURM, capacity=self._capacity)

    def write(self, run: JobRun) -> None:
        assert run.priority is not None
        self.written[run.index] = self.priority_range.map(run.priority)
