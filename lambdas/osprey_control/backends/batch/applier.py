"""AWS Batch container jobs on a fair-share queue: share weights from Osprey's priorities (docs/design.md §6,
docs/metrics-and-actuation.md).

A running or queued Batch container job's own priority cannot be changed, but its share's weight can. A job
is submitted (``osprey.batch`` sets ``shareIdentifier`` from the block's ``share_identifier``) either with

- *Osprey's team share* ``osprey-<team>-g<class>`` (``osprey.batch.team_share``, :mod:`.team_shares`): the
  share's ``weightFactor`` is the team fold (:func:`.team_shares.fold_weights`, the function the simulator's
  ``fairshare+osprey`` calls) over every active job of the share in the registry (:mod:`.team_fold`): their
  decayed GPU usage and their priorities. It is written every cycle, whether or not a priority changed, since
  usage moves; or
- a share of the job's *own*: its ``weightFactor`` follows the job's priority (:func:`weight_factor`).

Per cycle and per scheduling policy there is one read (DescribeSchedulingPolicies) and at most one
``UpdateSchedulingPolicy``, which sets Osprey's weights, writes the team shares and prunes Osprey's entries
that have no job left, all at once (:class:`.distribution.PolicyEdit`); entries of other share identifiers
(and ``shareDecaySeconds``, ``computeReservation``) are sent back as they were read. The apply call edits the
policies of the cycle's changed jobs; :meth:`BatchShareApplier.housekeep`, which the apply step runs after it,
edits every other policy with a team share or an entry to prune, from the same reads (:mod:`.cycle`).
Throttling and 5xx of the update are retried with backoff; if it still fails, only that policy's jobs fail.

Entries Osprey adds are recorded in the registry's share ledger (:mod:`osprey_control.registry.shares`) before
the update that adds them; an entry that was in a policy before Osprey touched it is never recorded, so never
changed nor removed: a job submitted with such an identifier is skipped with the reason. Osprey owns an entry only
when its identifier is in Osprey's namespace too (``osprey-``, :mod:`.ownership`): an entry weighs every job of
its identifier, so a job under a team's own identifier is refused even where the team has no entry yet, and an
entry an earlier Osprey created for such an identifier is removed by the housekeeping. A job whose identifier
is covered by another entry's wildcard (``team*``) fails on its own, since Batch rejects overlapping
identifiers. Batch allows 500 active share identifiers per queue: the entry of a finished job's own share, and
a team share with no active job left, are taken out again.

The update is a read-modify-write of the whole policy, so two executions updating it at once could lose each
other's weights. :meth:`BatchShareApplier.apply_guarded` asks the apply step's fence right before each
``UpdateSchedulingPolicy`` and stops once another execution holds the lease (docs/control-plane.md, Fencing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from osprey_control.aws import call_bound_ms, retried_bound_ms
from osprey_control.backends.actuation import (
    ApplyReport,
    ApplyResult,
    ClientApplier,
    Outcome,
    PriorityChange,
    failure,
    may_have_landed,
    prefilter,
)
from osprey_control.backends.batch.cycle import (
    ActiveJobs,
    Cycle,
    ShareLedgerPort,
    read_cycle,
    resolve_queues,
)
from osprey_control.backends.batch.distribution import (
    FIRST_BACKOFF_S,
    UPDATE_ATTEMPTS,
    PolicyEdit,
    holds,
    update_with_retry,
)
from osprey_control.backends.batch.ownership import is_osprey_identifier, not_osprey_identifier
from osprey_control.backends.batch.pending import (
    Pending,
    accept,
    foreign,
    group_by_policy,
    held_by,
    resolve_jobs,
)
from osprey_control.backends.batch.team_fold import Member, policy_team_weights
from osprey_control.errors import is_transient
from osprey_control.registry import Backend, ShareEntry

__all__ = ["BatchShareApplier"]

logger = logging.getLogger(__name__)


class BatchShareApplier(ClientApplier):
    """Fair-share ``weightFactor``s of job and team shares, one ``UpdateSchedulingPolicy`` per policy per cycle.

    ``active_jobs``: the registry's active Batch jobs (the deployment's listing), which the team shares' weights
    are computed from; ``clock`` (epoch seconds) dates their usage; ``sleep`` waits between retries.
    """

    backends = frozenset({Backend.BATCH})
    service = "batch"
    chunk_size = None  # one UpdateSchedulingPolicy per policy per cycle: all of a cycle's jobs at once

    def __init__(
        self,
        client: Any = None,
        ledger: ShareLedgerPort | None = None,
        active_jobs: ActiveJobs | None = None,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(client)
        self.ledger = ledger
        self.active_jobs = active_jobs
        self.clock = clock
        self.sleep = sleep
        # Entries this applier added (policy, share): Osprey's even without a ledger to record them in.
        self._created: set[tuple[str, str]] = set()
        # The apply call's reads and the fence check it was given, for the housekeeping after it.
        self._cycle: tuple[Cycle, Callable[[], bool]] | None = None

    @property
    def write_bound_ms(self) -> float:
        """The longest one UpdateSchedulingPolicy may take: our retries of botocore's retries
        (:func:`osprey_control.aws.retried_bound_ms`); ``may_write`` is asked for it before each. The read-back
        after a failed update (:meth:`_landed`) is a read, made once every write attempt has ended: not in it."""
        one = call_bound_ms(self.client if hasattr(self.client, "meta") else None)
        return retried_bound_ms(one, UPDATE_ATTEMPTS, FIRST_BACKOFF_S)

    def apply(self, changes: Sequence[PriorityChange]) -> ApplyReport:
        return self.apply_guarded(changes, lambda: True)

    def apply_guarded(self, changes: Sequence[PriorityChange], may_write: Callable[[], bool]) -> ApplyReport:
        """:meth:`apply`, asking ``may_write`` right before each UpdateSchedulingPolicy; once it says no, the
        jobs of that policy and of the policies after it are ``deferred`` (nothing written) and
        ``fence_lost`` is set."""
        todo, results = prefilter(changes, self.backends)
        report = ApplyReport(results)
        self._cycle = None
        pending = resolve_jobs(self.client, todo, report)
        if not pending:
            return report
        cycle = self._read([item.queue for item in pending])
        if cycle.ledger_error is not None:  # rather than add entries nobody could prune: retried next cycle
            error = cycle.ledger_error
            report.results.extend(failure(item.change, error, "reading the share ledger") for item in pending)
            return report
        for policy_arn, jobs in group_by_policy(pending, cycle, report).items():
            if report.fence_lost:
                report.deferred.extend(item.change.record.key for item in jobs)
                continue
            cycle.synced.add(policy_arn)
            self._sync(policy_arn, jobs, cycle, report, may_write)
        self._cycle = (cycle, may_write)
        return report

    def housekeep(self, may_write: Callable[[], bool]) -> ApplyReport:
        """The policies the cycle's changes did not touch: their team shares' weights written, Osprey's entries
        without a job pruned (one UpdateSchedulingPolicy per policy that needs one). Failures are logged and
        retried next cycle."""
        report = ApplyReport()
        last, self._cycle = self._cycle, None
        # The apply call's reads are this cycle's when it was given the same fence check (the same execution
        # of the apply step: the fence is the execution's lease token); otherwise (unfenced, or an apply call
        # whose housekeeping never ran) they are read again.
        cycle = last[0] if last is not None and last[1] == may_write else self._read([])
        if cycle.ledger_error is not None:
            logger.warning(
                "share ledger unreadable; pruning next cycle", extra={"error": repr(cycle.ledger_error)}
            )
            return report
        if cycle.listing_error is not None and self.active_jobs is not None:
            logger.warning("team shares not written this cycle", extra={"error": cycle.listing_error})
        for policy_arn in sorted(cycle.policies() - cycle.synced):
            if report.fence_lost:
                break
            try:
                self._sync(policy_arn, [], cycle, report, may_write)
            except Exception as error:  # this policy waits for the next cycle; the others go on
                logger.warning(
                    "scheduling policy not updated", extra={"policy": policy_arn, "error": repr(error)}
                )
        return report

    def _read(self, queues: list[str]) -> Cycle:
        cycle = read_cycle(self.active_jobs, self.ledger)
        member_queues = [member.record.job_queue or "" for member in cycle.members or ()]
        resolve_queues(self.client, cycle, [*queues, *member_queues])
        return cycle

    def _mine(self, cycle: Cycle, policy_arn: str, share: str) -> bool:
        owned = cycle.owners is not None and (policy_arn, share) in cycle.owners
        return owned or (policy_arn, share) in self._created

    def _sync(
        self,
        policy_arn: str,
        jobs: list[Pending],
        cycle: Cycle,
        report: ApplyReport,
        may_write: Callable[[], bool],
    ) -> None:
        """Read ``policy_arn``, set its jobs' and team shares' weights, prune, write once if anything changed.
        With ``jobs``, failures are their results; without (housekeeping), they are raised."""
        try:
            found = self.client.describe_scheduling_policies(arns=[policy_arn])["schedulingPolicies"]
        except Exception as error:
            if not jobs:
                raise
            report.results.extend(
                failure(item.change, error, f"DescribeSchedulingPolicies {policy_arn}") for item in jobs
            )
            return
        if not found:  # a deleted policy: its jobs fail, and Osprey's entries in it are forgotten
            reason = f"scheduling policy {policy_arn} not found (DescribeSchedulingPolicies)"
            report.results.extend(
                ApplyResult(item.change.record.key, Outcome.FAILED, item.change.priority, reason)
                for item in jobs
            )
            self._forget(cycle.prunable(policy_arn), policy_arn)
            return
        edit = PolicyEdit(policy_arn, found[0])
        accepted = accept(jobs, edit, report)
        refused = self._set_own(edit, [item for item in accepted if item.team is None], cycle)
        refused |= self._set_teams(edit, [item for item in accepted if item.team], cycle, report)
        done, claims = edit.set_weights, edit.claims
        for item in accepted:
            if item.share in refused:
                report.results.append(
                    ApplyResult(
                        item.change.record.key, Outcome.SKIPPED, item.change.priority, refused[item.share]
                    )
                )
        written = [item for item in accepted if item.share in done]
        pruned = [entry for entry in cycle.prunable(policy_arn) if entry.share not in done]
        edit.remove(entry.share for entry in pruned)
        if claims and self.ledger is not None:
            try:  # before the policy update: an entry in the policy is always one the ledger knows
                self.ledger.add(claims)
            except Exception as error:
                if not jobs:
                    raise
                report.results.extend(
                    failure(item.change, error, "recording the share entry") for item in written
                )
                return
        if edit.changed:
            # As late as possible: between this check and the update only milliseconds pass.
            if not may_write():
                logger.warning("fence lost: scheduling policy not updated", extra={"policy": policy_arn})
                report.fence_lost = True
                report.deferred.extend(item.change.record.key for item in written)
                return

            def count() -> None:  # every call, retries included, is a write
                report.writes += 1

            try:
                update_with_retry(self.client, edit, count, sleep=self.sleep)
            except Exception as error:  # only the jobs of this policy fail, unless the update landed
                if not self._landed(edit, error):
                    self._unclaim(claims, error, found[0], policy_arn)
                    if not jobs:
                        raise
                    report.results.extend(
                        failure(item.change, error, f"UpdateSchedulingPolicy {policy_arn}")
                        for item in written
                    )
                    return
            self._created.update((policy_arn, claim.share) for claim in claims)
            # A pruned entry is no longer Osprey's: one created later under its name (a person's) is not either.
            self._created.difference_update((policy_arn, share) for share in edit.removed)
            report.pruned += len(edit.removed)
            logger.info(
                "scheduling policy updated",
                extra={
                    "policy": policy_arn,
                    "jobs": len(written),
                    "shares": len(done),
                    "pruned": sorted(edit.removed),
                },
            )
        self._forget(pruned, policy_arn)
        for item in written:
            weight, changed = done[item.share]
            report.results.append(
                ApplyResult(
                    item.change.record.key,
                    Outcome.APPLIED,
                    item.change.priority,
                    "written" if changed else "already set",
                    native_value=f"{item.share}={weight}",
                )
            )

    def _landed(self, edit: PolicyEdit, error: Exception) -> bool:
        """After a failed UpdateSchedulingPolicy: whether a new read shows the policy holding the edit (an
        update that landed but whose answer was lost, retried into a failure). Then the weights are in place:
        the jobs are applied, never failed with their weights on the queue."""
        if not may_have_landed(error):
            return False
        try:
            found = self.client.describe_scheduling_policies(arns=[edit.arn])["schedulingPolicies"]
        except Exception:  # the update's failure is the one reported
            return False
        landed = bool(found) and holds(edit, found[0])
        if landed:
            logger.warning(
                "UpdateSchedulingPolicy failed, yet the policy holds its weights: applied",
                extra={"policy": edit.arn, "error": repr(error)},
            )
        return landed

    def _unclaim(self, claims: list[ShareEntry], error: BaseException, read: Any, policy_arn: str) -> None:
        """After an update Batch refused (a permanent error: it did not land), take the entries it would have
        added out of the ledger again, so that an entry someone creates later under that name is not taken for
        Osprey's. After a transient failure the update may have landed, so the claims stay (pruning forgets
        them if it did not). Re-claims of entries that were already Osprey's stay too."""
        if is_transient(error) or self.ledger is None:
            return
        existed = {
            str(e.get("shareIdentifier"))
            for e in (read.get("fairsharePolicy") or {}).get("shareDistribution") or ()
        }
        added = [claim for claim in claims if claim.share not in existed]
        if added:
            self._forget(added, policy_arn)

    def _forget(self, entries: list[ShareEntry], policy_arn: str) -> None:
        """Take pruned entries out of the ledger; a failure only leaves them for the next cycle to forget (they
        are no longer in the policy, so pruning them again changes nothing there)."""
        if not entries or self.ledger is None:
            return
        try:
            self.ledger.remove(entries)
        except Exception as error:
            logger.warning("pruned entries not forgotten", extra={"policy": policy_arn, "error": repr(error)})

    def _set_own(
        self,
        edit: PolicyEdit,
        items: list[Pending],
        cycle: Cycle,
    ) -> dict[str, str]:
        """Each job's own share's weight from its priority; the shares refused, with the reason (the entry is
        not Osprey's, or its identifier is not: :mod:`.ownership`; or another active job holds it)."""
        refused: dict[str, str] = {}
        ended = {(entry.policy_arn, entry.share) for entry in cycle.finished}
        for item in items:
            key = item.change.record.key
            owner = None if cycle.owners is None else cycle.owners.get((edit.arn, item.share))
            if edit.has(item.share) and not self._mine(cycle, edit.arn, item.share):
                refused[item.share] = foreign(item.share)  # a person's, another tool's or deployment's
                continue
            if not is_osprey_identifier(item.share):
                refused[item.share] = not_osprey_identifier(item.share)  # may be a team's: never created
                continue
            if owner is not None and owner != key and (edit.arn, item.share) not in ended:
                refused[item.share] = held_by(item.share, owner)  # its job still runs: not this job's
                continue
            if not edit.has(item.share) or (owner is not None and owner != key):
                # Osprey's entry (new, or left by an ended job with the same identifier): this job's now.
                edit.claims.append(ShareEntry(edit.arn, item.share, key))
            edit.put(item.share, item.weight)
        return refused

    def _set_teams(
        self,
        edit: PolicyEdit,
        items: list[Pending],
        cycle: Cycle,
        report: ApplyReport,
    ) -> dict[str, str]:
        """Every team share of the policy with an active job: the fold's weight; the shares refused, with why."""
        if cycle.members is None:
            reason = f"team share weights not computed: {cycle.listing_error}"
            transient = (
                self.active_jobs is not None
            )  # a failed listing is retried; a missing one is a setup error
            report.results.extend(
                ApplyResult(item.change.record.key, Outcome.FAILED, item.change.priority, reason, transient)
                for item in items
            )
            return {}
        # This cycle's priorities; a changed job the listing (an eventually consistent index) misses counts too.
        changed = {item.change.record.key: item for item in items}
        members = [
            Member(m.share, m.record, changed[m.record.key].change.priority) if m.record.key in changed else m
            for m in cycle.members_of(edit.arn)
        ]
        listed = {member.record.key for member in members}
        members += [
            Member(item.team, item.change.record, item.change.priority)
            for item in items
            if item.team is not None and item.change.record.key not in listed
        ]
        refused: dict[str, str] = {}
        for share, weight in policy_team_weights(members, edit.fairshare, self.clock()).items():
            if edit.wildcard_over(share) is not None:
                continue  # Batch would reject the update; the share's changed jobs failed in _accept
            if edit.has(share) and not self._mine(cycle, edit.arn, share):
                refused[share] = foreign(share)
                continue
            if not edit.has(share):
                first = next(member.record.key for member in members if member.share.identifier == share)
                edit.claims.append(ShareEntry(edit.arn, share, first))
            edit.put(share, weight)
        return refused
