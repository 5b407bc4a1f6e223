"""The ``osprey`` scheduler: the production derivation engine and gang watch driving a priority queue.

Every cycle (the policy's ``derivationIntervalSeconds`` unless overridden) each active job's simulated
metrics (:mod:`~osprey_control.simulate.telemetry`) go through :func:`osprey_control.derivation.engine.derive`
with its applied priority, so damping, deadband and rounding are the engine's own. The queue is served in
applied-priority order (then submission), whole jobs at a time, skipping jobs that do not fit (the backend's
queue honours the priority Osprey applies; it does not block on its head). A multi-worker job is watched
with :func:`osprey_control.gang.decision.decide` under the policy's ``coScheduling`` settings (resolved by
:func:`~osprey_control.gang.settings.resolve_settings`): ``requeue`` suspends it with the production
back-off, ``fail`` stops it, ``serial`` lets it go on. With preemption on, a queued job may evict running
jobs whose applied priority is at least ``preemption_margin`` points lower (least priority first, only the
victims needed), provided the victim has trained for at least one cycle and was preempted fewer than
``max_preemptions_per_job`` times.

The policy schema has no preemption setting, so preemption and its guards are simulator options here
(default on, margin 20, at most one preemption per job).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from osprey_control.contract import OspreyBlock
from osprey_control.derivation import engine as derivation_engine
from osprey_control.gang.decision import Action, GangPhase, GangState, Readiness, decide, start
from osprey_control.gang.settings import GangSettings, resolve_settings
from osprey_control.policy import PriorityDerivationPolicy
from osprey_control.simulate.preemption import select_victims
from osprey_control.simulate.sim import JobRun, Scheduler, Status
from osprey_control.simulate.telemetry import job_metrics

__all__ = ["GANG_TIMER", "Osprey"]

GANG_TIMER = "gang-watch"
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return _EPOCH + timedelta(seconds=seconds)


class Osprey(Scheduler):
    name: ClassVar[str] = "osprey"

    def __init__(
        self,
        policy: PriorityDerivationPolicy,
        *,
        cycle_s: float | None = None,
        preemption: bool = True,
        preemption_margin: int = 20,
        max_preemptions_per_job: int = 1,
        noise: float = 3.0,
        seed: int = 0,
    ) -> None:
        self.policy = policy
        self.compiled = derivation_engine.compile_policy(policy)
        self.interval_s = float(cycle_s if cycle_s is not None else policy.spec.derivation_interval_seconds)
        self.cycle_s = self.interval_s
        self.gang_settings: GangSettings | None = resolve_settings(
            OspreyBlock(priority_derivation_profile=policy.name), policy.spec.co_scheduling
        )
        self.preemption = preemption
        self.preemption_margin = preemption_margin
        self.max_preemptions_per_job = max_preemptions_per_job
        self.noise = noise
        self._rng = random.Random(f"osprey-telemetry/{seed}")
        self._gangs: dict[int, GangState] = {}
        self.derivations = 0
        self.gangs_decided = 0
        self.gangs_ready_in_time = 0

    # -- priorities -------------------------------------------------------------------------------------
    def on_arrival(self, run: JobRun, now: float) -> None:
        if run.priority is None:
            run.priority = self.compiled.initial_priority
        run.queue_key_s = run.job.submit_s

    def on_cycle(self, now: float) -> None:
        changed = False
        for run in self.sim.active():
            metrics = job_metrics(run, now, self._rng, self.noise)
            decision = derivation_engine.derive(self.compiled, metrics, run.priority)
            self.derivations += 1
            if decision.priority != run.priority:
                run.priority = decision.priority
                run.priority_changes += 1
                changed = True
        if changed:
            self.sim.mark_changed()

    # -- admission and preemption -----------------------------------------------------------------------
    def schedule(self, now: float) -> None:
        sim = self.sim
        queued = sorted(sim.queue.values(), key=lambda r: (-(r.priority or 0), r.queue_key_s, r.index))
        for run in queued:
            if run.status is not Status.QUEUED:
                continue
            if sim.cluster.fits(run.job.gpus):
                sim.allocate(run, now)
            elif self.preemption:
                self._preempt_for(run, now)

    def _preempt_for(self, run: JobRun, now: float) -> None:
        sim = self.sim
        ceiling = (run.priority or 0) - self.preemption_margin
        # Only jobs that trained for a full cycle (so their priority reflects their metrics) and have not
        # been preempted too often already: without these guards an aging policy and jobs that cannot
        # checkpoint preempt each other in a loop (measured: docs/scheduling.md).
        settled = now - self.interval_s
        candidates = sorted(
            (
                r
                for r in sim.running.values()
                if (r.priority or 0) <= ceiling
                and r.train_started_s is not None
                and r.train_started_s <= settled
                and r.preemptions < self.max_preemptions_per_job
            ),
            key=lambda r: (r.priority or 0, -(r.allocated_s or 0.0), -r.index),
        )
        if not candidates:
            return
        victims = select_victims(sim.cluster, run.job.gpus, candidates, importance=lambda r: r.priority or 0)
        if victims is None:
            return
        for victim in victims:
            sim.evict(victim, now, preempted=True)
        sim.allocate(run, now)

    # -- gang watch (production decide/start) -----------------------------------------------------------
    def on_allocated(self, run: JobRun, now: float) -> None:
        if self.gang_settings is None or run.workers < 2:
            return
        state = self._gangs.get(run.index)
        if state is not None and state.phase.terminal:
            return  # preempted after its gang was decided: nothing left to watch
        if state is None or state.phase is GangPhase.WAITING:
            # First placement, or placed again after a preemption cut the watch short: a new watch.
            self._gangs[run.index] = start(_at(now))
            self._step(run, now)
            return
        # Placed again after a requeue: the watch resumes (the back-off has passed) and starts a new attempt.
        step = decide(self.gang_settings, state, None, _at(now))
        self._gangs[run.index] = step.state
        if step.wait_seconds is not None:
            self.sim.set_timer(run, now + step.wait_seconds, GANG_TIMER)

    def on_timer(self, run: JobRun, tag: str, now: float) -> None:
        if tag == GANG_TIMER and run.status in (Status.STARTING, Status.TRAINING):
            self._step(run, now)

    def _step(self, run: JobRun, now: float) -> None:
        assert self.gang_settings is not None
        seen = Readiness(run.ready_workers(now), run.workers)
        step = decide(self.gang_settings, self._gangs[run.index], seen, _at(now))
        self._gangs[run.index] = step.state
        if step.decided:
            self.gangs_decided += 1
            self.gangs_ready_in_time += 1 if step.state.ready_in_time else 0
        if step.action is Action.SUSPEND:
            assert step.wait_seconds is not None
            self.sim.evict(run, now, hold_until=now + step.wait_seconds, preempted=False)
        elif step.action is Action.STOP:
            self.sim.fail(run, now)
        elif step.wait_seconds is not None:
            self.sim.set_timer(run, now + step.wait_seconds, GANG_TIMER)
