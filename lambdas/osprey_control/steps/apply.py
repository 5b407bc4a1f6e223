"""The apply step of a cycle: every job whose derived priority is not on its backend yet, applied at once.

It runs after the shards' Map state so that Batch gets one UpdateSchedulingPolicy per queue per cycle. The
shards report only counts (the state machine's payload stays the same size whatever the fleet); the pending
jobs are in the registry's sparse ``apply-pending`` index, which the apply step queries for every shard that
reported. It re-reads each one and applies its ``derived_priority`` against its ``applied_priority`` (what
the backend holds), then records the outcome with a conditional write, which also sets or removes the job's
``apply-pending`` entry:

- applied (written, or found already set) → ``applied_priority`` and ``applied_at``;
- failed transiently (throttling, 5xx, connection) → ``apply_failure`` with a count of consecutive attempts,
  retried next cycle until ``MAX_TRANSIENT_APPLY_ATTEMPTS``;
- failed otherwise, or skipped (not opted in, job finished, no applier) → a permanent ``apply_failure``: not
  tried again until the derived priority changes.

Liveness: outcomes are recorded per applier call (all of Batch's jobs at once, since Batch gets one
UpdateSchedulingPolicy per policy per cycle; the per-job appliers in chunks of their ``chunk_size``), and no
call starts after the deadline's margin. Jobs not reached are ``deferred``: still pending in the registry, so
the next cycle finds them again. The jobs whose derived priority changed longest ago go first, so
the ones a deadline defers are tried early next cycle.

Fencing: with a ``fence`` (the execution's lease token), every registry write is a transaction that checks the
token; each applier call is preceded by its write intent, recorded in such a transaction, and Batch's applier
reads the token again right before each UpdateSchedulingPolicy (:class:`~osprey_control.backends.GuardedApplier`).
No backend write starts unless its bound ends before the deadline, which is the lease's expiry at the latest
(:mod:`osprey_control.steps.bounded_writes`), and the intents an earlier execution could not delete are
repaired first (:mod:`osprey_control.steps.in_doubt`). Once the fence fails (``ApplyReport.fence_lost``) the
step writes nothing more: the calls not made are ``deferred`` and the outcomes not recorded are ``unrecorded``;
those jobs stay pending for the execution that now holds the lease, and no apply failure is recorded against
them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from osprey_control.backends import (
    Applier,
    ApplyReport,
    ApplyResult,
    Outcome,
    PriorityChange,
    apply_all,
    write_phase,
)
from osprey_control.registry import (
    Backend,
    Fence,
    FenceLostError,
    JobKey,
    JobRecord,
    JobStatus,
    WriteIntents,
)
from osprey_control.steps.bounded_writes import BackendWrites, fitting
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.mode import Mode, ModeSettings

__all__ = [
    "ApplyRegistry",
    "RecordSource",
    "apply_cycle",
    "pending_changes",
    "record_outcomes",
    "reported_shards",
    "shadow_split",
]

logger = logging.getLogger(__name__)

_HOLDS_GPUS = frozenset({JobStatus.STARTING, JobStatus.RUNNING})


class RecordSource(Protocol):
    def get(self, key: JobKey) -> JobRecord | None: ...


class PendingSource(RecordSource, Protocol):
    def pending_keys(self, shard: int | None = None) -> list[JobKey]: ...


class ApplyRegistry(PendingSource, Protocol):
    """The registry as the apply step uses it (:class:`osprey_control.registry.dynamodb.JobRegistry`; with a
    fence, also its ``list_active(backend=...)``, for repairs: :mod:`osprey_control.steps.in_doubt`)."""

    def record_applied(
        self, key: JobKey, priority: int, now: datetime, *, fence: Fence | None = None, detail: str = ""
    ) -> JobRecord | None: ...

    def record_apply_failure(
        self,
        key: JobKey,
        priority: int,
        reason: str,
        *,
        permanent: bool,
        now: datetime,
        fence: Fence | None = None,
    ) -> JobRecord | None: ...

    def record_shadow(
        self, key: JobKey, priority: int, detail: str, now: datetime, *, fence: Fence | None = None
    ) -> JobRecord | None: ...


def reported_shards(reports: Iterable[Mapping[str, Any]]) -> list[int | None]:
    """The shards whose derive step reported (a failed shard's jobs wait for a cycle in which it derives);
    ``[None]`` (every shard) when a report covers the whole registry (``shard`` null or absent)."""
    shards: list[int | None] = []
    for report in reports:
        if report.get("failed"):
            continue
        shard = report.get("shard")
        if not isinstance(shard, int) or isinstance(shard, bool):
            return [None]
        if shard not in shards:
            shards.append(shard)
    return shards


def pending_changes(shards: Iterable[int | None], registry: PendingSource) -> list[PriorityChange]:
    """A :class:`PriorityChange` to ``derived_priority`` for each job of ``shards`` in the ``apply-pending``
    index, re-read with a consistent read (the index lags) and still pending (``JobRecord.apply_pending``);
    jobs that left the registry meanwhile are skipped."""
    changes: list[PriorityChange] = []
    seen: set[JobKey] = set()
    for shard in shards:
        for key in registry.pending_keys(shard):
            if key in seen:
                continue
            seen.add(key)
            record = registry.get(key)
            if record is not None and record.apply_pending() and record.derived_priority is not None:
                changes.append(PriorityChange(record, record.derived_priority))
    return changes


def record_outcomes(
    report: ApplyReport,
    registry: ApplyRegistry,
    keys: Iterable[JobKey],
    now: datetime,
    fence: Fence | None = None,
) -> None:
    """Write each job's apply result (of ``keys``) to the registry; a job whose write fails is listed in
    ``report.unrecorded`` and stays pending, so the next cycle applies it again (appliers are idempotent).
    Once the fence fails (here or before: ``report.fence_lost``), nothing more is written."""
    wanted = set(keys)
    for result in report.results:
        if result.job not in wanted:
            continue
        if report.fence_lost:
            report.unrecorded.append((result.job, "FenceLostError: another execution holds the cycle lease"))
            continue
        try:
            if result.outcome is Outcome.SHADOW:  # nothing was written; the job stays pending
                registry.record_shadow(result.job, result.priority, result.reason, now, fence=fence)
            elif result.outcome is Outcome.APPLIED:
                detail = f"{result.reason}: {result.native_value}" if result.native_value else result.reason
                registry.record_applied(result.job, result.priority, now, fence=fence, detail=detail)
            else:
                # A skip (not opted in, finished, no applier) is as final as a non-transient failure.
                permanent = result.outcome is Outcome.SKIPPED or not result.transient
                reason = f"{result.outcome.value}: {result.reason}"
                registry.record_apply_failure(
                    result.job, result.priority, reason, permanent=permanent, now=now, fence=fence
                )
        except FenceLostError as error:  # permanent, and not the job's failure: stop writing, record nothing
            logger.warning("fence lost: apply outcomes no longer recorded", extra={"token": error.token})
            report.fence_lost = True
            report.unrecorded.append((result.job, f"FenceLostError: {error}"))
        except Exception as error:  # one job's registry write must not lose the others'
            message = f"{type(error).__name__}: {error}"
            logger.warning("apply outcome not recorded", extra={"job": str(result.job), "error": message})
            report.unrecorded.append((result.job, message))


def _write_order(change: PriorityChange, owner: Applier | None) -> tuple[int, bool, datetime]:
    # The inversion-safe phases first (osprey_control.backends.write_order: no moment between two cycles
    # preempts a job neither cycle's priorities would), then the oldest change first within each.
    record = change.record
    phase = write_phase(
        holds_gpus=record.status in _HOLDS_GPUS,
        applied=record.applied_priority,
        priority=change.priority,
        held=_unwritten(owner, record),
    )
    changed = record.last_changed_at
    return phase, changed is not None, changed or datetime.min.replace(tzinfo=UTC)


def _unwritten(owner: Applier | None, record: JobRecord) -> float | None:
    """What a job Osprey has not written holds, in Osprey's terms, where its applier can tell (the EKS applier
    maps the Workload's class value back through its priority range)."""
    read = getattr(owner, "unwritten_priority", None)
    if record.applied_priority is not None or read is None:
        return None
    value = read(record)
    return float(value) if isinstance(value, int | float) else None


def _work(
    changes: Sequence[PriorityChange], appliers: Iterable[Applier]
) -> tuple[list[PriorityChange], list[tuple[Applier, list[PriorityChange]]]]:
    """The changes without an applier, and each applier's calls: whole-cycle appliers first (Batch must see
    all its jobs in one call), then the per-job ones in chunks, in :func:`_write_order`."""
    by_backend: dict[Backend, Applier] = {}
    for applier in appliers:
        by_backend.update(dict.fromkeys(applier.backends, applier))
    unrouted: list[PriorityChange] = []
    routed: dict[int, tuple[Applier, list[PriorityChange]]] = {}
    ordered = sorted(changes, key=lambda change: _write_order(change, by_backend.get(change.record.backend)))
    for change in ordered:
        owner = by_backend.get(change.record.backend)
        if owner is None:
            unrouted.append(change)
        else:
            routed.setdefault(id(owner), (owner, []))[1].append(change)
    calls: list[tuple[Applier, list[PriorityChange]]] = []
    for applier, batch in sorted(routed.values(), key=lambda entry: _chunk_size(entry[0]) is not None):
        size = _chunk_size(applier) or len(batch)
        calls.extend((applier, batch[start : start + size]) for start in range(0, len(batch), size))
    return unrouted, calls


def _chunk_size(applier: Applier) -> int | None:
    size = getattr(applier, "chunk_size", None)
    return size if isinstance(size, int) and size > 0 else None


def shadow_split(
    changes: Sequence[PriorityChange], modes: ModeSettings
) -> tuple[list[PriorityChange], ApplyReport]:
    """The changes to write (their job is enforced), and a :data:`Outcome.SHADOW` result for each of the others:
    what would have been written, and which setting made the job shadow."""
    enforced: list[PriorityChange] = []
    shadow = ApplyReport()
    for change in changes:
        record = change.record
        mode, why = modes.explain(record.backend, record.policy)
        if mode is Mode.ENFORCE:
            enforced.append(change)
            continue
        reason = f"shadow ({why}): would write {change.priority} to {record.backend.value}; nothing written"
        shadow.results.append(ApplyResult(record.key, Outcome.SHADOW, change.priority, reason))
    return enforced, shadow


def apply_cycle(
    reports: Iterable[Mapping[str, Any]],
    registry: ApplyRegistry,
    appliers: Iterable[Applier],
    *,
    now: datetime | None = None,
    deadline: Deadline | None = None,
    fence: Fence | None = None,
    intents: WriteIntents | None = None,
    modes: ModeSettings | None = None,
) -> ApplyReport:
    """Apply the pending jobs of every shard that reported (``reports``: the Map's output, each with its
    ``shard``) and record each call's outcomes as it returns, until ``deadline`` (none: all of them) or until
    ``fence`` fails; one report for the cycle, with the jobs not reached under ``deferred``.

    With a ``fence``, each applier call is preceded by its write intent and the in-doubt intents of earlier
    executions are repaired first (:mod:`osprey_control.steps.in_doubt`; ``intents``: where they are, by
    default the fence's table).

    ``modes`` (default: enforce everywhere): a job in shadow mode (:mod:`osprey_control.steps.mode`) reaches
    no applier; its would-be value is recorded (once per value) and it stays pending. No in-doubt repair is
    written to a shadow job, and an applier's housekeeping (Batch: team shares, pruning) runs only for a backend
    where some job may be enforced."""
    now = now or datetime.now(UTC)
    deadline = deadline or Deadline.never()
    appliers = list(appliers)
    if fence is not None and intents is None:
        intents = WriteIntents(fence.table_name, fence.client)
    modes = modes or ModeSettings()
    pending = pending_changes(reported_shards(reports), registry)
    changes, shadow = shadow_split(pending, modes)
    writes = BackendWrites(deadline, fence, intents if fence is not None else None)
    repairs = [
        change
        for change in writes.in_doubt(registry, changes)
        if modes.for_job(change.record.backend, change.record.policy) is Mode.ENFORCE
    ]
    unrouted, calls = _work([*changes, *repairs], appliers)
    report = writes.report
    report.extend(shadow)
    # A value already recorded is not written again: a steady shadow fleet costs its reads, no writes.
    new = {change.record.key for change in pending if change.record.shadow_priority != change.priority}
    record_outcomes(shadow, registry, new, now, fence)
    report.extend(apply_all(unrouted, ()))  # skipped: no applier for their backend
    record_outcomes(report, registry, (change.record.key for change in unrouted), now, fence)
    queue = list(calls)
    while queue:
        applier, batch = queue.pop(0)
        fit = 0 if report.fence_lost else fitting(applier, batch, deadline)
        if 0 < fit < len(batch):  # the rest in a call of its own, checked against the deadline again
            queue.insert(0, (applier, batch[fit:]))
            batch = batch[:fit]
        if fit == 0:
            writes.defer(change.record.key for change in batch)
            continue
        part = writes.call(applier, batch)
        if part is not None:
            record_outcomes(part, registry, writes.own(batch), now, fence)
            writes.add(part)
    writes.housekeep(
        applier for applier in appliers if any(modes.may_enforce(backend) for backend in applier.backends)
    )
    writes.settle([*changes, *repairs], now)
    return report
