"""Plain views of control-plane state, shared by the CLI and ``osprey local`` (neither imports the other):
what a job's gang watch state looks like as a table cell and as JSON, durations as people read them, and the
weights a decision really used."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from osprey_control.gang import GangPhase, GangState
from osprey_control.policy import InvalidPolicy
from osprey_control.wiring import GUARD_CYCLE_NOTE, GUARD_ORDER_NOTE, GUARD_SIGNATURE_NOTE

__all__ = [
    "decision_inputs",
    "decision_notes",
    "dropped_rules",
    "effective_weights",
    "gang_cell",
    "gang_details",
    "guard_note",
    "human_duration",
    "load_cell",
    "policy_cell",
    "policy_fields",
    "reason_text",
    "shadow_text",
]

# Short column labels for the built-in metrics (docs/design.md §3); any other metric keeps its name.
_SHORT = {
    "gpu_utilization": "gpu",
    "memory_bandwidth_utilization": "membw",
    "gpu_memory_utilization": "gpumem",
    "node_interconnect_latency": "latency",
    "spot_interruption_risk": "spot",
    "queue_wait": "wait",
    "attained_service": "service",
    "remaining_time": "remaining",
    "requested_gpus": "gpus",
    "reservation": "reserve",
}


def gang_cell(state: GangState | None) -> str:
    """The GANG column: ``ready 20s``, ``waiting 2/4``, ``requeued #1``, ``timeout → serial``, ``timeout →
    failed``, ``ended``, or
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
    # Both are what a timeout led to: "serial" alone reads like a choice, not an outcome.
    if state.phase in (GangPhase.SERIAL, GangPhase.FAILED):
        return f"timeout → {state.phase.value}"
    return state.phase.value


def shadow_text(would: int, held: int | None, at: datetime | None, backend: str) -> str:
    """What shadow mode recorded for a job, in words: ``shadow: would write 73 to batch (since 10:02:11Z);
    nothing written, batch holds 40``. The CLI's jobs, explain and history say it the same way."""
    since = f" (since {at.isoformat()})" if at is not None else ""
    holds = "nothing from Osprey" if held is None else str(held)
    return f"shadow: would write {would} to {backend}{since}; nothing written, {backend} holds {holds}"


def policy_fields(name: str, invalid: Mapping[str, InvalidPolicy] | None) -> dict[str, Any]:
    """A job's policy as ``osprey jobs --json`` shows it: ``policy_state`` is ``valid``, ``last-good`` (the stored
    policy is invalid; its jobs are derived under ``policy_version``, its last good parameter version) or
    ``held`` (invalid with nothing to fall back to: its jobs keep their last applied priority); None when the
    deployed policies could not be read. ``policy_error`` says what is wrong, naming the parameter and field."""
    if invalid is None:
        return {"policy_state": None, "policy_version": None, "policy_error": None}
    found = invalid.get(name)
    if found is None:
        return {"policy_state": "valid", "policy_version": None, "policy_error": None}
    return {
        "policy_state": found.state,
        "policy_version": found.fallback_version,
        "policy_error": found.describe(),
    }


def policy_cell(name: str, state: str | None, version: int | None) -> str:
    """The POLICY column: the name, and for an invalid policy what its jobs get: ``team (invalid: held)``,
    ``team (invalid: last good v3)``."""
    if state == "held":
        return f"{name} (invalid: held)"
    if state == "last-good":
        return f"{name} (invalid: last good v{version})"
    return name


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


def human_duration(elapsed: timedelta | float) -> str:
    """kubectl's style: ``42s``, ``7m``, ``7m30s`` (under 10 min), ``3h``, ``3h5m`` (under 10 h), ``4d``, ``4d6h``
    (under 10 days); two units at most, the second only where it still matters."""
    seconds = int(elapsed.total_seconds() if isinstance(elapsed, timedelta) else elapsed)
    if seconds < 0:
        return "0s"  # a clock ahead of ours: "just now", not a negative age
    if seconds < 120:
        return f"{seconds}s"
    minutes, second = divmod(seconds, 60)
    if minutes < 10:
        return f"{minutes}m{second}s" if second else f"{minutes}m"
    if minutes < 60:
        return f"{minutes}m"
    hours, minute = divmod(minutes, 60)
    if hours < 10:
        return f"{hours}h{minute}m" if minute else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days, hour = divmod(hours, 24)
    if days < 10:
        return f"{days}d{hour}h" if hour else f"{days}d"
    return f"{days}d"


def _counts(rule: Mapping[str, Any]) -> bool:
    """Whether a rule is a weighted part of the mean (stage custom rules have no weight)."""
    return rule.get("weight") is not None and bool(rule.get("used")) and rule.get("priority") is not None


def effective_weights(rules: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """Each rule's share of the decision's weighted mean, by rule index: its weight over the weights of the
    rules that had data (docs/design.md §4: rules without data are dropped and the rest renormalised). A rule
    that was dropped, or a stage rule, is 0. ``rules``: a stored decision's (``Decision.to_dict()["rules"]``)."""
    total = sum(float(rule["weight"]) for rule in rules if _counts(rule))
    return {
        int(rule["index"]): (float(rule["weight"]) / total if total > 0 and _counts(rule) else 0.0)
        for rule in rules
    }


def dropped_rules(rules: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The weighted rules that had no data and so did not count (their weight went to the others)."""
    return [rule for rule in rules if rule.get("weight") is not None and not _counts(rule)]


def decision_inputs(decision: Mapping[str, Any] | None) -> dict[str, float | None]:
    """The raw value of each built-in metric a decision read, by metric (None: the rule had no data): the
    load behind the priority, as the engine saw it."""
    rules = (decision or {}).get("rules") or []
    return {str(rule["metric"]): rule.get("value") for rule in rules if rule.get("kind") == "builtin"}


# The decision's ``notes["guard"]``: the guard's verdict for the job's pool (osprey_control.guard.GUARD_NOTE).
_GUARD = "guard"
# Notes the control plane writes for itself (a pool's order, cycle and signature, read back by the next cycle
# and ``osprey report``): the guard's verdict line already says the order, so they are not shown.
_MACHINE_NOTES = frozenset({GUARD_ORDER_NOTE, GUARD_CYCLE_NOTE, GUARD_SIGNATURE_NOTE})
_GUARDED = "guarded"
_HELD = "held"


def decision_notes(decision: Mapping[str, Any] | None, *, guard: bool = True) -> dict[str, str]:
    """Why a cross-job value was what it was when the decision was made (``inputs.notes``), by name: the
    guard's verdict for the job's pool (``guard``: the order chosen, why, and each candidate's predicted wait and
    goodput; first, and left out with ``guard=False``), and for ``reservation`` whether the job was lifted as
    the next to run, held back or backfilled, and the predicted start that caused it."""
    notes = ((decision or {}).get("inputs") or {}).get("notes") or {}
    if not isinstance(notes, Mapping):
        return {}
    shown = {
        str(name): str(text)
        for name, text in notes.items()
        if name not in _MACHINE_NOTES and (guard or name != _GUARD)
    }
    return dict(sorted(shown.items(), key=lambda item: item[0] != _GUARD))


def guard_note(decision: Mapping[str, Any] | None) -> str | None:
    """The guard's verdict for the job's pool as the decision recorded it (None: no guard ran for it)."""
    return decision_notes(decision).get(_GUARD)


def reason_text(decision: Mapping[str, Any]) -> str:
    """The decision's reason as ``osprey explain`` ends its damping line: ``guarded`` says what it means, since
    the priority then is the job's native one, not the rules' (their scores are shown for reference)."""
    reason = str(decision.get("reason") or "-")
    if reason == _GUARDED:
        return f"{_GUARDED}: the pool keeps its backend's native order this cycle; the rules above did not set it"
    if reason == _HELD:
        return (
            f"{_HELD}: raised to the guard's floor, so that no queued job its native place protects it from "
            "can preempt it"
        )
    return reason


def _short_number(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2g}"


def load_cell(inputs: Mapping[str, float | None]) -> str:
    """``gpu 94 membw 71 latency 124`` (``-`` for a metric without data); ``-`` before any decision."""
    if not inputs:
        return "-"
    return " ".join(
        f"{_SHORT.get(metric, metric)} {'-' if value is None else _short_number(float(value))}"
        for metric, value in inputs.items()
    )
