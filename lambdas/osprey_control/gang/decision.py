"""One step of a gang watch: from what was observed, the next state and what to do (pure, docs/design.md §7).

The watch is a loop: observe readiness, :func:`decide`, act, wait ``wait_seconds``, repeat until
``wait_seconds`` is None. Outcomes:

- ``ready``: enough workers are up; the watch ends. If that happened within the timeout of the first
  attempt, the gang counts as *ready in time* for CoSchedulingSuccessRate.
- timeout with fallback ``serial``: the job goes on without the gang guarantee; the watch ends.
- timeout with ``requeue``: the job is suspended, waits 60 s · 2^(n-1) (cap 3600 s), is resumed and watched
  again; after ``max_requeues`` requeues it is handled as ``fail``.
- timeout with ``fail``: the job is stopped; the watch ends.
- the job finished or was cancelled while waiting: the watch ends, with no fallback and no decision counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from osprey_control.gang.settings import GangSettings, requeue_delay_seconds
from osprey_control.policy import GangFallback

__all__ = ["Action", "GangPhase", "GangState", "Readiness", "Step", "decide", "start"]


class GangPhase(StrEnum):
    WAITING = "waiting"  # watching for readiness within the current attempt's timeout
    REQUEUED = "requeued"  # suspended after a timeout, waiting for the back-off to pass
    READY = "ready"  # terminal: the gang formed
    SERIAL = "serial"  # terminal: timed out, running without the gang guarantee
    FAILED = "failed"  # terminal: timed out and stopped (fallback fail, or requeues exhausted)
    ENDED = "ended"  # terminal: the job finished or was cancelled while the watch waited

    @property
    def terminal(self) -> bool:
        return self not in {GangPhase.WAITING, GangPhase.REQUEUED}


class Action(StrEnum):
    NONE = "none"
    SUSPEND = "suspend"  # take the job's partial allocation back and queue it again
    RESUME = "resume"  # let a requeued job be scheduled again
    STOP = "stop"  # stop the job (only Osprey-tagged jobs are ever stopped)


@dataclass(frozen=True)
class Readiness:
    """What the backend reports now: workers up out of requested, or that the job is over."""

    ready_workers: int
    requested_workers: int
    finished: bool = False
    detail: str = ""


@dataclass(frozen=True)
class GangState:
    phase: GangPhase
    attempt: int  # 1-based; a requeue starts the next attempt
    watch_started_at: datetime
    attempt_started_at: datetime
    requeues: int = 0
    # The first decision of this gang (ready within the first attempt's timeout, or not): what
    # CoSchedulingSuccessRate counts, once per gang.
    ready_in_time: bool | None = None
    ready_at: datetime | None = None
    resume_at: datetime | None = None
    ready_workers: int = 0
    requested_workers: int = 0
    reason: str = ""

    @property
    def wait_seconds(self) -> float | None:
        """GangWaitSeconds: from the start of the watch to readiness (None until ready)."""
        if self.ready_at is None:
            return None
        return (self.ready_at - self.watch_started_at).total_seconds()


@dataclass(frozen=True)
class Step:
    state: GangState
    action: Action
    wait_seconds: int | None  # None: the watch is over
    decided: bool = False  # this step made the gang's first decision (publish CoSchedulingSuccessRate)


def start(now: datetime) -> GangState:
    return GangState(phase=GangPhase.WAITING, attempt=1, watch_started_at=now, attempt_started_at=now)


def _whole_seconds(delta: timedelta) -> int:
    return max(1, math.ceil(delta.total_seconds()))


def decide(settings: GangSettings, state: GangState, seen: Readiness | None, now: datetime) -> Step:
    """The next step. ``seen`` is None while the job is suspended (nothing to observe)."""
    if state.phase.terminal:
        return Step(state, Action.NONE, None)
    if state.phase is GangPhase.REQUEUED:
        return _after_backoff(settings, state, now)
    if seen is None:
        raise ValueError("a waiting gang needs a readiness observation")
    state = replace(state, ready_workers=seen.ready_workers, requested_workers=seen.requested_workers)
    if seen.finished:
        ended = replace(state, phase=GangPhase.ENDED, reason=seen.detail or "the job ended while waiting")
        return Step(ended, Action.NONE, None)
    first_decision = state.ready_in_time is None
    if settings.is_ready(seen.ready_workers, seen.requested_workers):
        ready = replace(
            state,
            phase=GangPhase.READY,
            ready_at=now,
            ready_in_time=True if first_decision else state.ready_in_time,
            reason=f"{seen.ready_workers}/{seen.requested_workers} workers ready",
        )
        return Step(ready, Action.NONE, None, decided=first_decision)
    deadline = state.attempt_started_at + timedelta(seconds=settings.timeout_seconds)
    if now < deadline:
        return Step(state, Action.NONE, min(settings.poll_seconds, _whole_seconds(deadline - now)))
    timed_out = replace(
        state,
        ready_in_time=False if first_decision else state.ready_in_time,
        reason=(
            f"{seen.ready_workers}/{seen.requested_workers} workers ready after "
            f"{settings.timeout_seconds} s (needs {settings.required_min_workers}%)"
        ),
    )
    return _fallback(settings, timed_out, now, decided=first_decision)


def _fallback(settings: GangSettings, state: GangState, now: datetime, *, decided: bool) -> Step:
    if settings.fallback is GangFallback.SERIAL:
        return Step(replace(state, phase=GangPhase.SERIAL), Action.NONE, None, decided=decided)
    if settings.fallback is GangFallback.REQUEUE and state.requeues < settings.max_requeues:
        delay = requeue_delay_seconds(state.requeues + 1)
        requeued = replace(
            state,
            phase=GangPhase.REQUEUED,
            requeues=state.requeues + 1,
            resume_at=now + timedelta(seconds=delay),
        )
        return Step(requeued, Action.SUSPEND, delay, decided=decided)
    reason = state.reason
    if settings.fallback is GangFallback.REQUEUE:
        reason = f"{reason}; gave up after {state.requeues} requeues"
    return Step(replace(state, phase=GangPhase.FAILED, reason=reason), Action.STOP, None, decided=decided)


def _after_backoff(settings: GangSettings, state: GangState, now: datetime) -> Step:
    if state.resume_at is not None and now < state.resume_at:
        return Step(state, Action.NONE, _whole_seconds(state.resume_at - now))
    resumed = replace(
        state, phase=GangPhase.WAITING, attempt=state.attempt + 1, attempt_started_at=now, resume_at=None
    )
    return Step(resumed, Action.RESUME, settings.poll_seconds)
