"""One invocation of the gang watch: load the state, observe, decide, act, save, report metrics.

The gang watch state machine calls :func:`watch_step` in a loop and waits ``wait_seconds`` between calls
until ``done``. Everything here is deterministic for a given clock, backend and store, so the moto-executed
state machine and the unit tests drive the same code.

Failures leave a step classified (:mod:`osprey_control.errors`), as exactly one of two classes, because Step
Functions matches a Lambda's error by its class name: :class:`~osprey_control.errors.TransientError` (throttled
or failing backend, no answer from the cluster, a concurrent state write) is what the state machine's Retry
names; :class:`~osprey_control.errors.PermanentError` (a refused request) ends the execution at once. Anything
unclassified is a bug and ends it too. The original error is the ``__cause__``.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from osprey_control.errors import PermanentError, TransientError, classify
from osprey_control.gang import (
    Action,
    GangBackend,
    GangPhase,
    GangSettings,
    GangState,
    NotOptedInError,
    Step,
    decide,
    start,
)
from osprey_control.gang.store import GangStore, StaleGangStateError, state_to_dict
from osprey_control.policy import GangFallback
from osprey_control.registry import JobKey
from osprey_control.steps.mode import Mode
from osprey_control.telemetry import MetricPoint
from osprey_control.wiring import CO_SCHEDULING_SUCCESS_RATE_METRIC, GANG_WAIT_METRIC, POLICY_DIMENSION

__all__ = ["WatchResult", "execution_name", "gang_metrics", "watch_step"]

logger = logging.getLogger(__name__)
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def execution_name(key: JobKey) -> str:
    """The watch execution's name: one per job, so a duplicate or replayed event cannot start a second one.

    Step Functions names are at most 80 characters of ``[A-Za-z0-9_-]``; a readable prefix plus a hash of
    the full key keeps them unique for any native id.
    """
    digest = hashlib.sha256(str(key).encode()).hexdigest()[:16]
    readable = _NAME_UNSAFE.sub("-", f"{key.backend.value}-{key.native_id}")[:56]
    return f"gang-{readable}-{digest}"


@dataclass(frozen=True)
class WatchResult:
    state: GangState
    action: Action
    wait_seconds: int | None
    metrics: tuple[MetricPoint, ...]

    @property
    def done(self) -> bool:
        return self.wait_seconds is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "done": self.done,
            "waitSeconds": self.wait_seconds if self.wait_seconds is not None else 0,
            "action": self.action.value,
            "gang": state_to_dict(self.state),
        }


def gang_metrics(step: Step, policy: str) -> tuple[MetricPoint, ...]:
    """CoSchedulingSuccessRate (100 = ready in time, 0 = timed out; its Average is the rate) at a gang's
    first decision, and GangWaitSeconds when it becomes ready."""
    dimensions = {POLICY_DIMENSION: policy}
    points: list[MetricPoint] = []
    if step.decided:
        rate = 100.0 if step.state.ready_in_time else 0.0
        points.append(MetricPoint(CO_SCHEDULING_SUCCESS_RATE_METRIC, "Percent", (rate,), dimensions))
    if step.state.phase is GangPhase.READY and step.state.wait_seconds is not None:
        points.append(MetricPoint(GANG_WAIT_METRIC, "Seconds", (step.state.wait_seconds,), dimensions))
    return tuple(points)


def _effective(settings: GangSettings, backend: GangBackend) -> GangSettings:
    if settings.fallback is GangFallback.REQUEUE and not backend.supports_requeue:
        return replace(settings, fallback=GangFallback.SERIAL)
    return settings


def _act(step: Step, backend: GangBackend, key: JobKey, mode: Mode) -> Step:
    if step.action is not Action.NONE and mode is Mode.SHADOW:
        # Observed and decided like any gang; the fallback is recorded, never sent to the backend.
        logger.info(
            "gang action not taken: shadow mode", extra={"job": str(key), "action": step.action.value}
        )
        reason = f"{step.state.reason}; shadow: would {step.action.value}, nothing written"
        return replace(step, state=replace(step.state, reason=reason))
    try:
        if step.action is Action.SUSPEND:
            backend.suspend()
        elif step.action is Action.RESUME:
            backend.resume()
        elif step.action is Action.STOP:
            backend.stop()
    except NotOptedInError as refused:
        logger.warning("gang fallback refused", extra={"job": str(key), "reason": str(refused)})
        return replace(step, state=replace(step.state, reason=f"{step.state.reason}; not stopped: {refused}"))
    return step


@contextmanager
def _for_the_state_machine() -> Iterator[None]:
    """Re-raise a classified failure as exactly TransientError or PermanentError, caused by the original (see the
    module docstring); an unclassified one propagates unchanged."""
    try:
        yield
    except StaleGangStateError as error:
        raise TransientError(f"another writer advanced the gang state: {error}") from error
    except Exception as error:
        kind = classify(error)
        if kind is None or type(error) in (TransientError, PermanentError):
            raise
        text = f"{type(error).__name__}: {error}" if kind is error else str(kind)
        if isinstance(kind, TransientError):
            raise TransientError(text) from error
        raise PermanentError(text, reason=kind.reason) from error


def watch_step(
    key: JobKey,
    settings: GangSettings,
    backend: GangBackend,
    store: GangStore,
    *,
    now: datetime,
    policy: str,
    mode: Mode = Mode.ENFORCE,
) -> WatchResult:
    """Advance the watch of ``key`` by one step. A transient fault raises :class:`TransientError` (the state
    machine retries the task with back-off); the state is saved only after the action succeeded, so a retried
    step repeats it. A permanent one raises :class:`PermanentError`. In shadow ``mode`` the step observes and
    decides as ever but takes no action (no suspend, resume or stop): the state's reason says what it would
    have done."""
    with _for_the_state_machine():
        return _step(key, settings, backend, store, now=now, policy=policy, mode=mode)


def _step(
    key: JobKey,
    settings: GangSettings,
    backend: GangBackend,
    store: GangStore,
    *,
    now: datetime,
    policy: str,
    mode: Mode,
) -> WatchResult:
    effective = _effective(settings, backend)
    state, version = store.load(key)
    if state is None:
        state = start(now)
    if state.phase.terminal:
        return WatchResult(state, Action.NONE, None, ())
    seen = backend.readiness() if state.phase is GangPhase.WAITING else None
    step = _act(decide(effective, state, seen, now), backend, key, mode)
    if effective.fallback is not settings.fallback and step.state.phase is GangPhase.SERIAL:
        reason = f"{step.state.reason}; requeue is impossible on {key.backend.value}, ran as serial"
        step = replace(step, state=replace(step.state, reason=reason))
    store.save(key, step.state, version, updated_at=now)
    if step.state.phase.terminal:
        logger.info(
            "gang decided",
            extra={"job": str(key), "phase": step.state.phase.value, "reason": step.state.reason},
        )
    return WatchResult(step.state, step.action, step.wait_seconds, gang_metrics(step, policy))
