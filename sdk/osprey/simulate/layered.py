"""Osprey layered on each backend, exactly as production actuates it (docs/scheduling.md).

Osprey only writes priorities; the backend model decides admission and preemption from them:

- ``kueue+osprey``: the :class:`~osprey.simulate.kueue.Kueue` model (BestEffortFIFO, ``LowerPriority``
  preemption, waitForPodsReady), scheduling after each write as a real Kueue acts on each PATCH; a
  Workload's ``spec.priority`` is what the production EKS applier writes,
  :meth:`osprey_control.backends.eks.applier.KueuePriorityRange.map` of the applied priority (its
  WorkloadPriorityClass value until Osprey's first write).
- ``fairshare+osprey``: the :class:`~osprey.simulate.baselines.FairShare` model with the share identifiers
  production has a team's jobs submitted with, one per team and job size class
  (:func:`osprey_control.backends.batch.team_shares.team_share_identifier`, ``osprey-<team>-g<class>``), and
  every cycle each share's ``weightFactor`` from the production
  :func:`osprey_control.backends.batch.team_shares.fold_weights`: the team's decayed usage (from the jobs'
  allocation intervals, as the registry records them) folded in, so teams keep their shares, and the best
  applied priority of each share's queued jobs ordering a team's classes. Within a share, submission order.
- ``sagemaker-queue``: an AWS Batch SAGEMAKER_TRAINING service job queue with a fair-share scheduling policy
  (share identifier = team): shares as in ``fairshare``, and within a share "jobs with a higher scheduling
  priority are scheduled before jobs with a lower scheduling priority" (UpdateServiceJob), then submission
  order. Without Osprey a job keeps the ``schedulingPriority`` it was submitted with (its priority class).
- ``sagemaker-queue+osprey``: the same queue with the production
  :func:`osprey_control.contract.batch_scheduling_priority` of the applied priority, written by
  ``UpdateServiceJob`` every cycle it changes.

Every layered scheduler also runs Osprey's gang watch (:class:`~osprey.simulate.gangwatch.SimulatedGangWatch`)
under the policy's ``coScheduling``; only EKS can suspend a job, so ``requeue`` runs as ``serial`` elsewhere.
"""

from __future__ import annotations

import math
from typing import ClassVar

from osprey.simulate.baselines import FairShare
from osprey.simulate.control import OspreyControl
from osprey.simulate.gangwatch import SimulatedGangWatch
from osprey.simulate.guard import SimulatedGuard
from osprey.simulate.kueue import Kueue
from osprey.simulate.sim import JobRun, Scheduler, Simulator, Status
from osprey_control.backends.batch import (
    TeamShareState,
    decayed_usage,
    fold_weights,
    parse_team_share,
    team_share_identifier,
)
from osprey_control.backends.eks import DEFAULT_KUEUE_PRIORITY_RANGE, KueuePriorityRange
from osprey_control.contract import batch_scheduling_priority
from osprey_control.guard import Model
from osprey_control.policy import PriorityDerivationPolicy
from osprey_control.registry import Backend

__all__ = ["FairShareOsprey", "KueueOsprey", "Layered", "SageMakerQueue", "SageMakerQueueOsprey"]

BATCH_MAX_SCHEDULING_PRIORITY = 9999


class Layered(Scheduler):
    """Mixin state of a backend model with Osprey on top: the control loop and the gang watch."""

    control: OspreyControl
    gangs: SimulatedGangWatch

    def _layer(
        self,
        policy: PriorityDerivationPolicy,
        cycle_s: float | None,
        seed: int,
        backend: Backend,
        guard: bool = True,
    ) -> None:
        self.control = OspreyControl(policy, backend=backend, cycle_s=cycle_s, seed=seed)
        # The production guard, unless the policy turns it off (spec.guard.enabled) or the caller does (tests
        # of the layering itself, which check what Osprey's own order makes the backend do).
        enabled = guard and self.control.compiled.guard_enabled
        self.control.guard = self.make_guard(self.control) if enabled else None
        # The backend's own value written for each job (Workload priority, schedulingPriority), by run index.
        self.written: dict[int, int] = {}
        self.cycle_s = self.control.interval_s
        # Only EKS can suspend a started job (osprey_control.backends.gangs).
        self.gangs = SimulatedGangWatch(policy, supports_requeue=backend is Backend.EKS)

    def write(self, run: JobRun) -> None:
        """Write ``run.priority`` to the backend in its own terms (the production mapping)."""
        raise NotImplementedError

    def make_guard(self, control: OspreyControl) -> SimulatedGuard:
        """The production guard over this backend's model (osprey_control.guard)."""
        raise NotImplementedError

    def _capacity(self) -> int | None:
        return self.control.default_capacity_gpus

    def bind(self, sim: Simulator) -> None:
        super().bind(sim)
        # docs/policies.md tells a user to set reservation.capacityGpus to the pool's GPUs: a policy that reads
        # the signal without it runs as if that step was followed (the simulated cluster's GPUs).
        self.control.default_capacity_gpus = sim.cluster.total

    def on_cycle(self, now: float) -> None:
        written = self.control.cycle(self.sim, now)
        for run in written:
            self.write(run)
        if written:
            self.sim.mark_changed()

    # Layered comes first in each subclass's bases, so these run the backend model's hook, then Osprey's.
    def on_arrival(self, run: JobRun, now: float) -> None:
        super().on_arrival(run, now)
        self.control.admit(run)

    def on_allocated(self, run: JobRun, now: float) -> None:
        super().on_allocated(run, now)
        self.gangs.on_allocated(self.sim, run, now)

    def on_timer(self, run: JobRun, tag: str, now: float) -> None:
        super().on_timer(run, tag, now)
        self.gangs.on_timer(self.sim, run, tag, now)


class KueueOsprey(Layered, Kueue):
    name: ClassVar[str] = "kueue+osprey"

    def __init__(
        self,
        policy: PriorityDerivationPolicy,
        *,
        cycle_s: float | None = None,
        seed: int = 0,
        priority_range: KueuePriorityRange = DEFAULT_KUEUE_PRIORITY_RANGE,
        preemption: bool = True,
        guard: bool = True,
    ) -> None:
        super().__init__(preemption=preemption)
        self._layer(policy, cycle_s, seed, Backend.EKS, guard)
        self.priority_range = priority_range
        self.control.unwritten = lambda run: priority_range.unmap(run.job.priority_class)

    def priority(self, run: JobRun) -> int:
        return self.written.get(run.index, run.job.priority_class)

    def make_guard(self, control: OspreyControl) -> SimulatedGuard:
        return SimulatedGuard(
            control.compiled,
            Model.KUEUE,
            capacity=self._capacity,
            native_value=lambda run: float(run.job.priority_class),
        )

    def write(self, run: JobRun) -> None:
        assert run.priority is not None
        self.written[run.index] = self.priority_range.map(run.priority)

    def on_cycle(self, now: float) -> None:
        # The applier PATCHes one Workload at a time, in job order, and Kueue acts on each update as it lands
        # (bench/kueue_bench.py on a real Kueue): a queued workload raised before a just-admitted one is raised
        # out of its queued priority can preempt it. So Kueue schedules after every write, not once per cycle.
        written = self.control.cycle(self.sim, now)
        for run in written:
            self.write(run)
            self.schedule(now)
        if written:
            self.sim.mark_changed()


class _FairShareLayered(Layered, FairShare):
    backend: ClassVar[Backend]

    def __init__(
        self,
        policy: PriorityDerivationPolicy,
        *,
        cycle_s: float | None = None,
        seed: int = 0,
        share_decay_s: float = 3600.0,
        guard: bool = True,
    ) -> None:
        super().__init__(share_decay_s=share_decay_s)
        self._layer(policy, cycle_s, seed, self.backend, guard)


class FairShareOsprey(_FairShareLayered):
    name: ClassVar[str] = "fairshare+osprey"
    backend: ClassVar[Backend] = Backend.BATCH
    # A finished job's usage has decayed to e^-10 of its GPUs after this many decay periods: dropped then.
    FORGET_AFTER_DECAYS: ClassVar[float] = 10.0

    def __init__(
        self,
        policy: PriorityDerivationPolicy,
        *,
        cycle_s: float | None = None,
        seed: int = 0,
        share_decay_s: float = 3600.0,
        guard: bool = True,
    ) -> None:
        super().__init__(policy, cycle_s=cycle_s, seed=seed, share_decay_s=share_decay_s, guard=guard)
        self._members: dict[str, list[JobRun]] = {}

    def share_of(self, run: JobRun) -> str:
        return team_share_identifier(run.job.share, run.job.gpus)

    def make_guard(self, control: OspreyControl) -> SimulatedGuard:
        return SimulatedGuard(
            control.compiled,
            Model.FAIRSHARE,
            capacity=self._capacity,
            share_usage=self._team_usage,
            share_weights=lambda: self.team_weight_factors,
        )

    def _team_usage(self, now: float) -> dict[str, float]:
        usage: dict[str, float] = {}
        for share, state in self._shares.items():
            owned = parse_team_share(share)
            team = owned.team if owned is not None else share
            usage[team] = usage.get(team, 0.0) + state.usage(now)
        return usage

    def on_arrival(self, run: JobRun, now: float) -> None:
        super().on_arrival(run, now)
        self._members.setdefault(self.share_of(run), []).append(run)

    def write(self, run: JobRun) -> None:
        """Nothing per job: the cycle writes every Osprey share's weight at once (:meth:`on_cycle`)."""

    def on_cycle(self, now: float) -> None:
        super().on_cycle(now)
        forget = self.FORGET_AFTER_DECAYS * self.share_decay_s
        states = []
        for share, runs in self._members.items():
            runs[:] = [run for run in runs if run.end_s is None or now - run.end_s <= forget]
            if not runs:
                continue
            usage = math.fsum(decayed_usage(run.intervals, now, self.share_decay_s) for run in runs)
            queued = [
                run.priority for run in runs if run.status is Status.QUEUED and run.priority is not None
            ]
            owned = parse_team_share(share)
            assert owned is not None  # share_of built it
            states.append(TeamShareState(owned, usage, max(queued) if queued else None))
        weights = fold_weights(states, self.team_weight_factors)
        if weights != {share: self.weight_factors.get(share) for share in weights}:
            self.weight_factors.update(weights)
            self.sim.mark_changed()


class SageMakerQueue(FairShare):
    """A SAGEMAKER_TRAINING service job queue: fair share between teams, ``schedulingPriority`` within one."""

    name: ClassVar[str] = "sagemaker-queue"

    def scheduling_priority(self, run: JobRun) -> int:
        """The service job's ``schedulingPriority``: what it was submitted with (its priority class)."""
        return min(BATCH_MAX_SCHEDULING_PRIORITY, max(0, run.job.priority_class))

    def within_share(self, runs: list[JobRun]) -> list[JobRun]:
        # sorted() is stable: equal priorities keep submission (queue) order.
        return sorted(runs, key=lambda run: -self.scheduling_priority(run))


class SageMakerQueueOsprey(SageMakerQueue, _FairShareLayered):
    name: ClassVar[str] = "sagemaker-queue+osprey"
    backend: ClassVar[Backend] = Backend.SAGEMAKER_QUEUED

    def scheduling_priority(self, run: JobRun) -> int:
        written = self.written.get(run.index)
        return written if written is not None else super().scheduling_priority(run)

    def make_guard(self, control: OspreyControl) -> SimulatedGuard:
        return SimulatedGuard(
            control.compiled,
            Model.SAGEMAKER_QUEUE,
            capacity=self._capacity,
            native_value=lambda run: float(SageMakerQueue.scheduling_priority(self, run)),
            share_usage=lambda now: {share: state.usage(now) for share, state in self._shares.items()},
            share_weights=lambda: self.team_weight_factors,
        )

    def write(self, run: JobRun) -> None:
        assert run.priority is not None
        self.written[run.index] = batch_scheduling_priority(run.priority)
