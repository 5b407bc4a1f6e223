"""Plain views of control-plane state, shared by the CLI and ``osprey local`` (neither imports the other):
what a job's gang watch state looks like as a table cell and as JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from osprey_control.gang.decision import GangPhase, GangState

__all__ = ["gang_cell", "gang_details"]


def gang_cell(state: GangState | None) -> str:
    """The GANG column: ``ready 20s``, ``waiting 2/4``, ``requeued #1``, ``serial``, ``failed``, ``ended``, or
    ``-`` for a job with no gang watch (not co-scheduled, or already running when it was registered)."""
    if state is None:
        return "-"
    if state.phase is GangPhase.READY:
        wait = state.wait_seconds
        return "ready" if wait is None else f"ready {wait:.0f}s"
    if state.phase is GangPhase.WAITING:
        # Before the first readiness look the watch knows no worker count yet.
        if state.requested_workers <= 0:
            return "waiting"
        return f"waiting {state.ready_workers}/{state.requested_workers}"
    if state.phase is GangPhase.REQUEUED:
        return f"requeued #{state.requeues}"
    return state.phase.value


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def gang_details(state: GangState | None) -> dict[str, Any] | None:
    """The gang's full state as JSON (None without a watch); keys are documented in docs/gangs.md."""
    if state is None:
        return None
    return {
        "phase": state.phase.value,
        "summary": gang_cell(state),
        "attempt": state.attempt,
        "requeues": state.requeues,
        "ready_workers": state.ready_workers,
        "requested_workers": state.requested_workers,
        "wait_seconds": state.wait_seconds,
        "ready_in_time": state.ready_in_time,
        "reason": state.reason or None,
        "watch_started_at": _time(state.watch_started_at),
        "attempt_started_at": _time(state.attempt_started_at),
        "ready_at": _time(state.ready_at),
        "resume_at": _time(state.resume_at),
    }
