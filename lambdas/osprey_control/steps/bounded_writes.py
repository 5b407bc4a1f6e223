"""The apply step's backend writes, each bounded by the lease and announced by a write intent.

- **Bounded.** A write starts only if its bound (every botocore attempt with its timeouts and backoff:
  ``write_bound_ms`` of the applier, :func:`osprey_control.aws.call_bound_ms`) ends before the deadline, which is
  the lease's expiry at the latest (:class:`~osprey_control.steps.deadline.Deadline`). A guarded applier (Batch,
  SageMaker, service jobs) asks before each write; an unguarded one (EKS, Slurm) gets only as many jobs as fit
  one after the other.
- **Announced.** With a fence, each applier call is preceded by a :class:`~osprey_control.registry.WriteIntent`
  (fenced: no call after a takeover) and followed by its deletion (fenced: an execution that lost the lease
  leaves it), and the intents other executions left are repaired (:mod:`osprey_control.steps.in_doubt`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from osprey_control.aws import call_bound_ms
from osprey_control.backends import Applier, ApplyReport, GuardedApplier, Housekeeper, PriorityChange
from osprey_control.registry import Fence, FenceLostError, JobKey, WriteIntent, WriteIntents
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.in_doubt import IntentSource, intent_for, repair_changes, resolved

__all__ = ["DEFAULT_JOB_BOUND_MS", "BackendWrites", "WriteGuard", "fitting"]

logger = logging.getLogger(__name__)

# An applier that does not say how long one job's writes may take (EKS, Slurm): a read and a write, each with
# the backend writers' botocore bound (their own clients' timeouts and retries are of the same size).
DEFAULT_JOB_BOUND_MS = 2 * call_bound_ms()


class WriteGuard:
    """Asked by a guarded applier right before each backend write: does the write's bound still end before
    the deadline? With a ``fence`` (Batch's whole-cycle call, which runs long), the lease is read again too.
    Remembers whether it said no for time."""

    def __init__(self, deadline: Deadline, bound_ms: float, fence: Fence | None) -> None:
        self.deadline, self.bound_ms, self.fence = deadline, bound_ms, fence
        self.out_of_time = False

    def __call__(self) -> bool:
        if not self.deadline.allows(self.bound_ms):
            self.out_of_time = True
            return False
        return self.fence is None or self.fence.holds()


def bound_ms(applier: object) -> float:
    """The longest one job's (per-job appliers) or one policy's (Batch) writes may take."""
    bound = getattr(applier, "write_bound_ms", None)
    return float(bound) if isinstance(bound, int | float) else DEFAULT_JOB_BOUND_MS


def fitting(applier: Applier, batch: Sequence[PriorityChange], deadline: Deadline) -> int:
    """How many of ``batch`` may go to ``applier`` now: all, if a guarded one can make its first write (it asks
    before the others) or a whole-cycle one its call; for an unguarded per-job one, as many as end one after the
    other before the deadline."""
    if isinstance(applier, GuardedApplier) or getattr(applier, "chunk_size", None) is None:
        # guarded: it asks before each further write; whole-cycle: its bound is the whole call's
        return len(batch) if deadline.allows(bound_ms(applier)) else 0
    left = deadline.left_ms()
    return len(batch) if math.isinf(left) else min(len(batch), max(0, int(left // bound_ms(applier))))


@dataclass
class BackendWrites:
    """One apply step's backend writes: ``report`` gets the cycle's jobs, ``repairs`` the in-doubt rewrites
    (not recorded per job: the registry already holds the value they put back)."""

    deadline: Deadline
    fence: Fence | None
    intents: WriteIntents | None
    report: ApplyReport = field(default_factory=ApplyReport)
    repairs: ApplyReport = field(default_factory=ApplyReport)
    doubt: list[WriteIntent] = field(default_factory=list)
    repaired: set[JobKey] = field(default_factory=set)
    calls: int = 0

    def in_doubt(self, registry: IntentSource, changes: Sequence[PriorityChange]) -> list[PriorityChange]:
        """The intents earlier calls left (none without a fence), and the changes that rewrite their jobs."""
        if self.fence is None or self.intents is None:
            return []
        self.doubt = self.intents.open()
        if not self.doubt:
            return []
        repairs = repair_changes(self.doubt, registry, (change.record.key for change in changes))
        self.repaired = {change.record.key for change in repairs}
        logger.warning(
            "backend writes of an earlier call in doubt: rewriting their jobs",
            extra={"intents": [intent.sk for intent in self.doubt], "jobs": len(repairs)},
        )
        return repairs

    def own(self, batch: Iterable[PriorityChange]) -> list[JobKey]:
        """The keys of ``batch`` whose outcome the registry records (the repairs' are not)."""
        return [change.record.key for change in batch if change.record.key not in self.repaired]

    def defer(self, keys: Iterable[JobKey]) -> None:
        for key in keys:
            (self.repairs if key in self.repaired else self.report).deferred.append(key)

    def _announce(self, applier: Applier, keys: Sequence[JobKey] | None) -> WriteIntent | bool | None:
        """Record the call's intent: the intent, None without a fence, False when the fence failed."""
        if self.fence is None or self.intents is None:
            return None
        self.calls += 1
        intent = intent_for(
            self.fence.token,
            self.calls,
            backends=applier.backends,
            keys=keys,
            deadline=self.deadline,
            now=datetime.now(UTC),
        )
        try:  # fenced: no backend write after a takeover, and the next holder learns what this one wrote
            self.intents.record(intent, self.fence)
        except FenceLostError:
            logger.warning("fence lost: no further backend writes", extra={"token": self.fence.token})
            self.report.fence_lost = True
            return False
        return intent

    def call(self, applier: Applier, batch: Sequence[PriorityChange]) -> ApplyReport | None:
        """One applier call behind its intent; None (the jobs deferred) when the fence failed first."""
        keys = [change.record.key for change in batch]
        # A whole-cycle applier's write is a whole scheduling policy (Batch): a late one can undo any job of it.
        whole_cycle = getattr(applier, "chunk_size", None) is None
        intent = self._announce(applier, None if whole_cycle else keys)
        if intent is False:
            self.defer(keys)
            return None
        if isinstance(applier, GuardedApplier):
            guard = WriteGuard(self.deadline, bound_ms(applier), self.fence if whole_cycle else None)
            part = applier.apply_guarded(batch, guard)
            self._settle_guard(part, guard)
        else:
            part = applier.apply(batch)
        if isinstance(intent, WriteIntent) and not part.fence_lost:
            self._resolve(intent)
        return part

    def _settle_guard(self, part: ApplyReport, guard: WriteGuard) -> None:
        if guard.out_of_time:  # the guard stopped for time, which is not a lost fence
            part.fence_lost = self.fence is not None and not self.fence.holds()

    def add(self, part: ApplyReport) -> None:
        """The call's results: the cycle's jobs to ``report``, the repairs' to ``repairs``."""
        mine = ApplyReport(
            [result for result in part.results if result.job not in self.repaired],
            part.writes,
            [entry for entry in part.unrecorded if entry[0] not in self.repaired],
            [key for key in part.deferred if key not in self.repaired],
            part.fence_lost,
            part.pruned,
        )
        self.report.extend(mine)
        self.repairs.results.extend(result for result in part.results if result.job in self.repaired)
        self.repairs.deferred.extend(key for key in part.deferred if key in self.repaired)

    def _resolve(self, intent: WriteIntent) -> None:
        """The intent's writes are over (or repaired): it goes, if this execution still holds the lease."""
        if self.fence is None or self.intents is None:
            return
        try:
            self.intents.resolve(intent, self.fence)
        except FenceLostError:  # another execution took over meanwhile: the intent stays for it to repair
            self.report.fence_lost = True
        except Exception as error:  # it stays in doubt and is repaired next cycle: a cost, never a loss
            logger.warning("write intent not removed", extra={"intent": intent.sk, "error": repr(error)})

    def housekeep(self, appliers: Iterable[Applier]) -> None:
        """Each applier's once-a-cycle work, after the jobs: only with time and the lease left, behind an intent
        for every job of its backends (its writes are not any one job's)."""
        for applier in appliers:
            if self.deadline.expired or self.report.fence_lost:
                return
            if not isinstance(applier, Housekeeper):
                continue
            guard = WriteGuard(self.deadline, bound_ms(applier), self.fence)
            if not self.deadline.allows(guard.bound_ms):
                return
            intent = self._announce(applier, None)
            if intent is False:
                return
            part = applier.housekeep(guard)
            self._settle_guard(part, guard)
            self.report.extend(part)
            if isinstance(intent, WriteIntent) and not part.fence_lost:
                self._resolve(intent)

    def settle(self, changes: Sequence[PriorityChange], now: datetime) -> None:
        """Delete the in-doubt intents whose window is over and whose jobs are all back on their backends."""
        if not self.doubt:
            return
        merged = ApplyReport()
        merged.extend(self.report)
        merged.extend(self.repairs)
        backends = {change.record.key: change.record.backend for change in changes}
        for intent in self.doubt:
            if resolved(intent, merged, backends, now):
                self._resolve(intent)
        if self.repairs.results:
            written = sum(1 for result in self.repairs.results if result.reason == "written")
            logger.info("in-doubt jobs rewritten", extra={"jobs": len(self.repaired), "written": written})
