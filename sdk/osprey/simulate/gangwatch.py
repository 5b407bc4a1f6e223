"""Osprey's gang watch in the simulator: the production :func:`~osprey_control.gang.decision.decide` and
:func:`~osprey_control.gang.decision.start` under the policy's ``coScheduling`` settings
(:func:`~osprey_control.gang.settings.resolve_settings`).

A multi-worker job is watched from the moment all its workers are placed: ``requeue`` suspends it with the
production back-off (only on a backend that can suspend, EKS; elsewhere it runs as ``serial``, exactly as
the production watch does), ``fail`` stops it, ``serial`` lets it go on.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from osprey.simulate.sim import JobRun, Simulator, Status
from osprey_control.contract import OspreyBlock
from osprey_control.gang import (
    Action,
    GangPhase,
    GangSettings,
    GangState,
    Readiness,
    decide,
    resolve_settings,
    start,
)
from osprey_control.policy import GangFallback, PriorityDerivationPolicy

__all__: list[str] = []

GANG_TIMER = "gang-watch"
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return _EPOCH + timedelta(seconds=seconds)


class SimulatedGangWatch:
    """One watch per multi-worker job; the owning scheduler forwards ``on_allocated`` and ``on_timer``."""

    def __init__(self, policy: PriorityDerivationPolicy, *, supports_requeue: bool) -> None:
        settings = resolve_settings(
            OspreyBlock(priority_derivation_profile=policy.name), policy.spec.co_scheduling
        )
        if settings is not None and settings.fallback is GangFallback.REQUEUE and not supports_requeue:
            settings = replace(settings, fallback=GangFallback.SERIAL)
        self.settings: GangSettings | None = settings
        self._gangs: dict[int, GangState] = {}
        self.decided = 0
        self.ready_in_time = 0

    def on_allocated(self, sim: Simulator, run: JobRun, now: float) -> None:
        if self.settings is None or run.workers < 2:
            return
        state = self._gangs.get(run.index)
        if state is not None and state.phase.terminal:
            return  # placed again after its gang was decided: nothing left to watch
        if state is None or state.phase is GangPhase.WAITING:
            # First placement, or placed again after an eviction cut the watch short: a new watch.
            self._gangs[run.index] = start(_at(now))
            self._step(sim, run, now)
            return
        # Placed again after a requeue: the watch resumes (the back-off has passed), a new attempt.
        step = decide(self.settings, state, None, _at(now))
        self._gangs[run.index] = step.state
        if step.wait_seconds is not None:
            sim.set_timer(run, now + step.wait_seconds, GANG_TIMER)

    def on_timer(self, sim: Simulator, run: JobRun, tag: str, now: float) -> None:
        if tag == GANG_TIMER and run.status in (Status.STARTING, Status.TRAINING):
            self._step(sim, run, now)

    def _step(self, sim: Simulator, run: JobRun, now: float) -> None:
        assert self.settings is not None
        seen = Readiness(run.ready_workers(now), run.workers)
        step = decide(self.settings, self._gangs[run.index], seen, _at(now))
        self._gangs[run.index] = step.state
        if step.decided:
            self.decided += 1
            self.ready_in_time += 1 if step.state.ready_in_time else 0
        if step.action is Action.SUSPEND:
            assert step.wait_seconds is not None
            sim.evict(run, now, hold_until=now + step.wait_seconds, preempted=False)
        elif step.action is Action.STOP:
            sim.fail(run, now)
        elif step.wait_seconds is not None:
            sim.set_timer(run, now + step.wait_seconds, GANG_TIMER)
