"""What the apply step records: the priority now on the backend, or why the derived one is not there yet.

Pure Python, no AWS import. The derive step writes ``derived_priority`` only; these merges are the apply step's
side of the record (``applied_priority``, ``applied_at``, ``apply_failure``, and in shadow mode
``shadow_priority``, ``shadow_at``), so that a failed write is retried
(transient) or parked (permanent) instead of being forgotten once the registry holds the decision.
"""

from __future__ import annotations

from datetime import datetime

from osprey_control.registry.model import ApplyFailure, JobRecord

__all__: list[str] = []

# How the apply step recorded a value it found already in place on the backend before issue 28 (item 5): as a
# permanent failure ("skipped: unchanged: workload ns/name", "skipped: unchanged (set by a concurrent writer):
# ..."), which left ``applied_priority`` stale. Those records are read as applied (:func:`read_in_place`).
LEGACY_IN_PLACE = "skipped: unchanged"


def merge_applied(record: JobRecord | None, priority: int, now: datetime) -> JobRecord | None:
    """``record`` with ``priority`` confirmed on the backend at ``now`` (None: the job left the registry).

    The failure is cleared, unless it is about the current derived priority and that is not the one applied
    (the derived value moved on while this apply ran, and its own apply already failed).
    """
    if record is None:
        return None
    failure = record.apply_failure
    if failure is None or failure.priority == priority or failure.priority != record.derived_priority:
        failure = None
    # Written for real: what shadow mode said it would write is no longer the job's state.
    return record.model_copy(
        update={
            "applied_priority": priority,
            "applied_at": now,
            "apply_failure": failure,
            "shadow_priority": None,
            "shadow_at": None,
        }
    )


def merge_shadow(record: JobRecord | None, priority: int, now: datetime) -> JobRecord | None:
    """``record`` with ``priority`` as what shadow mode would have written (None: the job left the registry);
    the same record when it already says so, so that a steady shadow fleet writes nothing each cycle. The
    applied fields are untouched: the backend holds what it held."""
    if record is None:
        return None
    if record.shadow_priority == priority:
        return record
    return record.model_copy(update={"shadow_priority": priority, "shadow_at": now})


def merge_apply_failure(
    record: JobRecord | None, priority: int, reason: str, *, permanent: bool, now: datetime
) -> JobRecord | None:
    """``record`` with a failed apply of ``priority``; consecutive transient failures of it are counted.

    :meth:`JobRecord.apply_pending` then decides: a transient failure is retried next cycle until
    ``MAX_TRANSIENT_APPLY_ATTEMPTS``; a permanent one waits for a new derived priority.
    """
    if record is None:
        return None
    previous = record.apply_failure
    repeated = previous is not None and previous.priority == priority and not previous.permanent
    attempts = previous.attempts + 1 if repeated and previous is not None and not permanent else 1
    failure = ApplyFailure(priority=priority, reason=reason, permanent=permanent, attempts=attempts, at=now)
    return record.model_copy(update={"apply_failure": failure})


def read_in_place(record: JobRecord) -> JobRecord:
    """``record`` as it is read: a legacy "skipped: unchanged" failure (:data:`LEGACY_IN_PLACE`) is what it
    reported, its priority found in place on the backend, so it reads as applied then (``applied_priority``
    and ``applied_at`` from the failure, no failure). Without this, a job the old apply step left so would
    never see its derived priority written again when it returns to the stale applied value (derived ==
    applied reads as nothing pending). The item itself is rewritten on the job's next write."""
    failure = record.apply_failure
    if failure is None or not failure.permanent or not failure.reason.startswith(LEGACY_IN_PLACE):
        return record
    return record.model_copy(
        update={"applied_priority": failure.priority, "applied_at": failure.at, "apply_failure": None}
    )
