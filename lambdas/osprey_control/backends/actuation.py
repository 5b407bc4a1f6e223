"""The applier interface: a cycle's priority changes in, a per-job report out (docs/design.md §6).

Every applier follows the same rules, enforced here where they do not depend on the backend:

- only a changed priority is written (``priority != record.applied_priority``); an unchanged one is reported
  applied without a backend call;
- a value already in place on the backend is success (:func:`already_set`, ``applied``), whoever put it there
  (this call's write whose answer was lost, an earlier cycle whose outcome was not recorded, a concurrent
  writer): never a skip or a failure, which would leave ``applied_priority`` stale, so that a later return of
  the derived priority to that stale value would never be written;
- only a job whose live tags say exactly ``osprey:enabled=true`` is written (the backend adapter reads the tags);
- one job's failure never stops the others; throttling and 5xx are retried by botocore's standard mode
  (:mod:`osprey_control.aws`) and, if they persist, are a :class:`~osprey_control.errors.TransientError`
  (:func:`failure` classifies what the backend call raised): reported as ``transient``, the apply step records
  the failure and retries it next cycle (up to ``MAX_TRANSIENT_APPLY_ATTEMPTS``); a permanent or unclassified
  failure, or a skip, is recorded as permanent and not retried until the derived priority changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from osprey_control.aws import WRITE_RETRY_CONFIG, call_bound_ms, client_for
from osprey_control.contract import ENABLED_TAG, opted_in, tags_as_dict
from osprey_control.errors import is_throttling, is_transient
from osprey_control.registry import Backend, JobKey, JobRecord
from osprey_control.wiring import DERIVED_PRIORITY_TAG

__all__ = [
    "ALREADY_SET",
    "DERIVED_PRIORITY_TAG",
    "NOT_ENABLED",
    "Applier",
    "ApplyReport",
    "ApplyResult",
    "ClientApplier",
    "GuardedApplier",
    "Housekeeper",
    "LiveJob",
    "Outcome",
    "PriorityChange",
    "ReadThenWriteApplier",
    "already_set",
    "apply_all",
    "failure",
    "is_enabled",
    "may_have_landed",
    "prefilter",
]

# DERIVED_PRIORITY_TAG (the tag the SageMaker applier writes) is osprey_control.wiring's, exported here too.
# Why a job that did not opt in is skipped, in every applier's words.
NOT_ENABLED = f"not tagged exactly {ENABLED_TAG}=true (not True, TRUE or 1); Osprey never writes to jobs that did not opt in"
# The reason of an APPLIED result with no write: the backend already holds the value wanted.
ALREADY_SET = "already set"


@dataclass(frozen=True, slots=True)
class PriorityChange:
    """The priority the cycle decided for one job (0..100); ``record.applied_priority`` is the one in force."""

    record: JobRecord
    priority: int


class Outcome(StrEnum):
    APPLIED = "applied"  # the backend now has the priority (written this cycle, or found already set)
    # Not allowed: not enabled, finished, not owned, no applier. Never a value already in place (APPLIED).
    SKIPPED = "skipped"
    FAILED = "failed"  # the write was attempted or impossible: see ``reason``
    # Shadow mode: not written (no applier was called); ``priority`` is what would have been.
    SHADOW = "shadow"


@dataclass(frozen=True, slots=True)
class ApplyResult:
    job: JobKey
    outcome: Outcome
    priority: int
    reason: str
    transient: bool = False  # a failure worth retrying next cycle (throttling, 5xx, connection)
    native_value: str | None = None  # what was written in the backend's own terms (9999 scale, weight)


@dataclass(slots=True)
class ApplyReport:
    results: list[ApplyResult] = field(default_factory=list)
    writes: int = 0  # write API calls made (UpdateServiceJob, AddTags, UpdateSchedulingPolicy)
    # Jobs whose outcome could not be recorded in the registry (the next cycle finds them still pending).
    unrecorded: list[tuple[JobKey, str]] = field(default_factory=list)
    # Jobs not tried before the deadline: still pending in the registry, applied by the next cycle.
    deferred: list[JobKey] = field(default_factory=list)
    # Another execution took the cycle lease: this one stopped writing (its jobs stay pending for that one).
    fence_lost: bool = False
    # Fair-share entries of finished jobs taken out of their scheduling policies (Batch housekeeping).
    pruned: int = 0

    def extend(self, other: ApplyReport) -> None:
        self.results.extend(other.results)
        self.writes += other.writes
        self.pruned += other.pruned
        self.unrecorded.extend(other.unrecorded)
        self.deferred.extend(other.deferred)
        self.fence_lost = self.fence_lost or other.fence_lost

    def _with(self, outcome: Outcome) -> list[ApplyResult]:
        return [result for result in self.results if result.outcome is outcome]

    @property
    def applied(self) -> list[ApplyResult]:
        return self._with(Outcome.APPLIED)

    @property
    def skipped(self) -> list[ApplyResult]:
        return self._with(Outcome.SKIPPED)

    @property
    def failed(self) -> list[ApplyResult]:
        return self._with(Outcome.FAILED)

    @property
    def shadow(self) -> list[ApplyResult]:
        return self._with(Outcome.SHADOW)

    def by_job(self) -> dict[JobKey, ApplyResult]:
        return {result.job: result for result in self.results}


class Applier(Protocol):
    """One backend's adapter. ``backends`` lists the :class:`Backend` values it handles.

    An applier may set ``chunk_size``: how many jobs the apply step may hand it at a time, so the step can stop
    between chunks at its deadline and record each chunk's outcomes at once. Without it (or None) the applier
    gets all its jobs of a cycle at once (Batch: one UpdateSchedulingPolicy per policy per cycle).
    """

    backends: frozenset[Backend]

    def apply(self, changes: Sequence[PriorityChange]) -> ApplyReport: ...


@runtime_checkable
class GuardedApplier(Applier, Protocol):
    """An applier whose one call makes several backend writes long after the call starts (Batch: one
    UpdateSchedulingPolicy per policy, after the Describe calls). ``may_write`` is asked right before each
    write (the apply step passes its fence check); once it says no, the applier writes nothing more, puts
    the jobs it did not write in ``deferred`` and sets ``fence_lost``."""

    def apply_guarded(
        self, changes: Sequence[PriorityChange], may_write: Callable[[], bool]
    ) -> ApplyReport: ...


@runtime_checkable
class Housekeeper(Protocol):
    """An applier with work of its own once per cycle, after the jobs are applied (Batch: pruning the shares of
    finished jobs). ``may_write`` as for :class:`GuardedApplier`."""

    def housekeep(self, may_write: Callable[[], bool]) -> ApplyReport: ...


def already_set(
    job: JobKey, priority: int, native_value: str | None = None, where: str = "", how: str = ""
) -> ApplyResult:
    """APPLIED, without a write: the value read back from the backend is the one ``priority`` maps to.

    The apply step records it applied (``applied_priority = priority``) whoever wrote the value: this
    cycle's write whose answer was lost (retried into a conflict, or failed after it landed), an earlier
    cycle's write whose registry record was lost, or a concurrent writer. ``where`` names what holds it,
    ``how`` says how it was found (e.g. "after a conflict"); both are appended to the reason.
    """
    reason = ALREADY_SET + (f" ({how})" if how else "") + (f": {where}" if where else "")
    return ApplyResult(job, Outcome.APPLIED, priority, reason, native_value=native_value)


def may_have_landed(error: BaseException) -> bool:
    """Whether a write that failed with ``error`` may still have landed, so that reading the value back is
    worth a call: anything but throttling (the service refused the request unread; a throttled job is retried
    next cycle, whose read finds whatever is in place). A lost answer (connection reset, timeout, 5xx) may
    hide a write that landed, and so may a refusal of a retry of it (a 409, a state that no longer allows
    it)."""
    return not is_throttling(error)


def is_enabled(tags: Mapping[str, str] | Iterable[Mapping[str, str]] | None) -> bool:
    """Whether a resource's live tags opt it in: exactly ``osprey:enabled=true``, the one definition of opt-in
    (:func:`osprey_control.contract.opted_in`) that ingest and IAM's condition use too."""
    return opted_in(ENABLED_TAG, tags_as_dict(tags))


def failure(change: PriorityChange, error: BaseException, action: str) -> ApplyResult:
    """A failed result for ``change`` whose ``reason`` names the action, the error and whether it is retried."""
    transient = is_transient(error)
    hint = (
        "it is retried next cycle"
        if transient
        else "not retried until the derived priority changes; fix the cause"
    )
    return ApplyResult(
        change.record.key,
        Outcome.FAILED,
        change.priority,
        f"{action} failed ({type(error).__name__}: {error}); {hint}",
        transient=transient,
    )


def prefilter(
    changes: Iterable[PriorityChange], backends: frozenset[Backend]
) -> tuple[list[PriorityChange], list[ApplyResult]]:
    """Split ``changes`` into those worth a backend call and the results of the rest (unchanged, invalid)."""
    todo: list[PriorityChange] = []
    done: list[ApplyResult] = []
    for change in changes:
        key, priority = change.record.key, change.priority
        if change.record.backend not in backends:
            done.append(ApplyResult(key, Outcome.SKIPPED, priority, f"not a {sorted(backends)} job"))
        elif isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 100:
            done.append(ApplyResult(key, Outcome.FAILED, priority, "priority must be an integer 0..100"))
        elif priority == change.record.applied_priority:
            # The registry already records it applied: no call, and never a skip, which the apply step would
            # record as a permanent failure of the priority in force.
            done.append(ApplyResult(key, Outcome.APPLIED, priority, "unchanged"))
        else:
            todo.append(change)
    return todo, done


class ClientApplier:
    """Shared by the AWS appliers: a lazily created client of ``service`` and the per-job loop.

    Subclasses set ``backends`` and ``service`` and implement ``_apply_one``; an applier that writes in batches
    (Batch fair share) overrides :meth:`apply` and keeps the client handling.
    """

    backends: frozenset[Backend] = frozenset()
    service: str = ""
    chunk_size: int | None = 25  # per-job calls: a chunk takes seconds, well inside the deadline's margin

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        # A backend writer: its bound (every attempt, timeouts and backoff) must fit before the lease expires.
        self._client = client_for(self.service, self._client, retry_config=WRITE_RETRY_CONFIG)
        return self._client

    @property
    def write_bound_ms(self) -> float:
        """How long one job may take at most: a read and a write, each with every botocore attempt
        (:func:`osprey_control.aws.call_bound_ms` of this applier's client)."""
        return 2 * call_bound_ms(self.client if hasattr(self.client, "meta") else None)

    def apply(self, changes: Sequence[PriorityChange]) -> ApplyReport:
        return self.apply_guarded(changes, lambda: True)

    def apply_guarded(self, changes: Sequence[PriorityChange], may_write: Callable[[], bool]) -> ApplyReport:
        """:meth:`apply`, asking ``may_write`` before each job (the apply step: does this job's
        :attr:`write_bound_ms` still end before the lease?); once it says no, the rest are ``deferred``."""
        todo, results = prefilter(changes, self.backends)
        report = ApplyReport(results)
        for index, change in enumerate(todo):
            if not may_write():
                report.deferred.extend(rest.record.key for rest in todo[index:])
                report.fence_lost = True  # GuardedApplier's word for "stopped by the guard"
                break
            report.results.append(self._apply_one(change, report))
        return report

    def _apply_one(self, change: PriorityChange, report: ApplyReport) -> ApplyResult:
        raise NotImplementedError(f"{type(self).__name__} must implement _apply_one or override apply")


@dataclass(frozen=True)
class LiveJob:
    """What a :class:`ReadThenWriteApplier` read of one job: its tags (where ``osprey:enabled`` is), the native
    value in place and the one Osprey's priority maps to, and what the write needs (``handle``, e.g. an ARN)."""

    tags: Mapping[str, str] | Iterable[Mapping[str, str]] | None
    current: str | None
    target: str
    handle: Any = None
    skip: str | None = None  # why the job must not be written although it opted in (e.g. it has finished)


class ReadThenWriteApplier(ClientApplier):
    """An applier with one read and at most one write per job (SageMaker tags, Batch service jobs).

    The read comes first because that is where ``osprey:enabled`` is checked, and a value already in place is
    not written again: it is :func:`already_set` (even on a job whose ``skip`` says it must not be written, a
    finished one: the backend holds the priority). A failed write (unless throttled: :func:`may_have_landed`)
    is followed by one more read: when it shows the target, the write landed and only its answer was lost (or
    a concurrent writer set the same value), so the job is applied too. Subclasses implement :meth:`_read`
    and :meth:`_write` and name both calls in failures.
    """

    def _read(self, change: PriorityChange) -> LiveJob:
        raise NotImplementedError(f"{type(self).__name__} must implement _read")

    def _write(self, change: PriorityChange, live: LiveJob) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _write")

    def _reading(self, change: PriorityChange) -> str:
        return f"reading job {change.record.native_id}"

    def _writing(self, change: PriorityChange) -> str:
        return f"writing job {change.record.native_id}"

    def _apply_one(self, change: PriorityChange, report: ApplyReport) -> ApplyResult:
        key, priority = change.record.key, change.priority
        try:
            live = self._read(change)
        except Exception as error:  # one job's failure must not stop the others
            return failure(change, error, self._reading(change))
        if not is_enabled(live.tags):
            return ApplyResult(key, Outcome.SKIPPED, priority, NOT_ENABLED)
        if live.current == live.target:
            return already_set(key, priority, live.target)
        if live.skip is not None:
            return ApplyResult(key, Outcome.SKIPPED, priority, live.skip)
        try:
            self._write(change, live)
        except Exception as error:  # one job's failure must not stop the others
            confirmed = self._confirm(change, live.target) if may_have_landed(error) else None
            return confirmed or failure(change, error, self._writing(change))
        finally:
            report.writes += 1
        return ApplyResult(key, Outcome.APPLIED, priority, "written", native_value=live.target)

    def _confirm(self, change: PriorityChange, target: str) -> ApplyResult | None:
        """After a failed write: :func:`already_set` when a new read shows ``target`` in place, else None (the
        failure stands; a failed read too, the next cycle reads again)."""
        try:
            current = self._read(change).current
        except Exception:  # the write's failure is the one reported
            return None
        if current != target:
            return None
        how = "the write failed, yet a new read shows the value"
        return already_set(change.record.key, change.priority, target, how=how)


def apply_all(changes: Sequence[PriorityChange], appliers: Iterable[Applier]) -> ApplyReport:
    """Route each change to the applier of its backend; a backend without one is skipped, never dropped."""
    by_backend: dict[Backend, Applier] = {}
    for applier in appliers:
        by_backend.update(dict.fromkeys(applier.backends, applier))
    report = ApplyReport()
    routed: dict[int, list[PriorityChange]] = {}
    owners: dict[int, Applier] = {}
    for change in changes:
        owner = by_backend.get(change.record.backend)
        if owner is None:
            report.results.append(
                ApplyResult(
                    change.record.key,
                    Outcome.SKIPPED,
                    change.priority,
                    f"no applier configured for backend {change.record.backend.value}",
                )
            )
            continue
        routed.setdefault(id(owner), []).append(change)
        owners[id(owner)] = owner
    for applier_id, batch in routed.items():
        report.extend(owners[applier_id].apply(batch))
    return report
