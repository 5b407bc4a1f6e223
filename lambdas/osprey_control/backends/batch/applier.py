"""AWS Batch container jobs on a fair-share queue: per-job share weights (docs/design.md §6).

A running or queued Batch container job's own priority cannot be changed, but its share's weight can: each
Osprey job must be submitted with its *own* share identifier (``osprey.batch`` sets ``shareIdentifier`` from the
block's ``share_identifier``; use one per job, e.g. the job name), and Osprey sets that identifier's
``weightFactor`` in the queue's fair-share scheduling policy from the job's priority (:func:`weight_factor`).

Per cycle and per scheduling policy there is exactly one read (DescribeSchedulingPolicies, batched) and at most
one ``UpdateSchedulingPolicy``, which merges Osprey's weights into the policy's existing ``shareDistribution``:
entries of other share identifiers (and ``shareDecaySeconds``, ``computeReservation``) are kept as they are.
A job whose identifier is covered by another entry's wildcard (``team*``) fails on its own, since Batch rejects
overlapping identifiers. If the update fails, only the jobs of that policy fail.

Entries Osprey adds are recorded in the registry's share ledger (:mod:`osprey_control.registry.shares`), and
:meth:`BatchShareApplier.housekeep`, which the apply step runs once per cycle, takes the entries of finished jobs
out of their policies again: Batch allows 500 active share identifiers per queue. Entries that were in a
policy before Osprey touched them are never recorded, so never removed.

The update is a read-modify-write of the whole policy, so two executions updating it at once could lose each
other's weights. :meth:`BatchShareApplier.apply_guarded` asks the apply step's fence right before each
``UpdateSchedulingPolicy`` and stops once another execution holds the lease (docs/control-plane.md, Fencing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from osprey_control.backends.actuation import (
    NOT_ENABLED,
    ApplyReport,
    ApplyResult,
    ClientApplier,
    Outcome,
    PriorityChange,
    failure,
    is_enabled,
    prefilter,
)
from osprey_control.backends.batch.team_shares import parse_team_share
from osprey_control.registry import Backend, JobKey, ShareEntry

__all__ = ["MAX_WEIGHT", "MIN_WEIGHT", "BatchShareApplier", "ShareLedgerPort", "weight_factor"]

logger = logging.getLogger(__name__)

# Batch accepts weightFactor 0.0001..999.9999 (botocore model, ShareAttributes); lower gets more capacity.
MIN_WEIGHT = 1.0  # priority 100: the same weight as a share Batch has no entry for
MAX_WEIGHT = 100.0  # priority 0: a hundredth of the capacity of a priority-100 job
_DESCRIBE_BATCH = 100  # DescribeJobs, DescribeJobQueues and DescribeSchedulingPolicies take at most 100 names


def weight_factor(priority: int) -> float:
    """Fair-share weight for an Osprey priority 0..100: geometric from 100.0 (at 0) down to 1.0 (at 100).

    Geometric so that every priority point changes a job's capacity share by the same ratio (about 4.7%);
    rounded to Batch's 4 decimals, it is strictly decreasing in the priority.
    """
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 100:
        raise ValueError(f"priority must be an integer 0..100, got {priority!r}")
    ratio = MAX_WEIGHT / MIN_WEIGHT
    weight: float = MIN_WEIGHT * ratio ** ((100 - priority) / 100)
    return round(weight, 4)


class ShareLedgerPort(Protocol):
    """The registry's record of the share entries Osprey added (:class:`osprey_control.registry.shares.ShareLedger`)."""

    def entries(self) -> list[ShareEntry]: ...

    def add(self, entries: Iterable[ShareEntry]) -> None: ...

    def remove(self, entries: Iterable[ShareEntry]) -> None: ...

    def finished(self, entries: Iterable[ShareEntry]) -> list[ShareEntry]: ...


@dataclass(slots=True)
class _Pending:
    change: PriorityChange
    share: str
    queue: str
    weight: float


def _chunks(items: Sequence[str]) -> Iterable[list[str]]:
    for offset in range(0, len(items), _DESCRIBE_BATCH):
        yield list(items[offset : offset + _DESCRIBE_BATCH])


def _covered_by_wildcard(share: str, distribution: Iterable[dict[str, Any]]) -> str | None:
    for entry in distribution:
        identifier = str(entry.get("shareIdentifier", ""))
        if identifier.endswith("*") and share.startswith(identifier[:-1]):
            return identifier
    return None


class BatchShareApplier(ClientApplier):
    """Fair-share ``weightFactor`` per job share identifier, one ``UpdateSchedulingPolicy`` per policy."""

    backends = frozenset({Backend.BATCH})
    service = "batch"
    chunk_size = None  # one UpdateSchedulingPolicy per policy per cycle: all of a cycle's jobs at once

    def __init__(self, client: Any = None, ledger: ShareLedgerPort | None = None) -> None:
        super().__init__(client)
        self.ledger = ledger
        # Entries this applier added (policy, share): Osprey's even without a ledger to record them in.
        self._created: set[tuple[str, str]] = set()

    def apply(self, changes: Sequence[PriorityChange]) -> ApplyReport:
        return self.apply_guarded(changes, lambda: True)

    def apply_guarded(self, changes: Sequence[PriorityChange], may_write: Callable[[], bool]) -> ApplyReport:
        """:meth:`apply`, asking ``may_write`` right before each UpdateSchedulingPolicy; once it says no, the
        jobs of that policy and of the policies after it are ``deferred`` (nothing written) and
        ``fence_lost`` is set."""
        todo, results = prefilter(changes, self.backends)
        report = ApplyReport(results)
        pending = self._resolve_jobs(todo, report)
        by_policy = self._resolve_policies(pending, report)
        owners = self._owners(by_policy, report)
        for policy_arn, jobs in by_policy.items():
            if report.fence_lost:
                report.deferred.extend(item.change.record.key for item in jobs)
                continue
            self._update_policy(policy_arn, jobs, report, may_write, owners)
        return report

    def _owners(
        self, by_policy: dict[str, list[_Pending]], report: ApplyReport
    ) -> dict[tuple[str, str], JobKey] | None:
        """Which job each recorded entry belongs to (one ledger read per cycle); None without a ledger. If the
        ledger cannot be read, the jobs fail (retried next cycle) rather than add entries nobody could prune."""
        if self.ledger is None or not by_policy:
            return None
        try:
            return {(entry.policy_arn, entry.share): entry.job for entry in self.ledger.entries()}
        except Exception as error:
            for policy_arn, jobs in list(by_policy.items()):
                report.results.extend(
                    failure(item.change, error, "reading the share ledger") for item in jobs
                )
                del by_policy[policy_arn]
            return None

    def _resolve_jobs(self, changes: list[PriorityChange], report: ApplyReport) -> list[_Pending]:
        """Live tags, share identifier and queue of each job (DescribeJobs, 100 per call)."""
        described: dict[str, dict[str, Any]] = {}
        by_id = {change.record.native_id: change for change in changes}
        for ids in _chunks(list(by_id)):
            try:
                for job in self.client.describe_jobs(jobs=ids).get("jobs", ()):
                    described[job["jobId"]] = job
            except Exception as error:  # only the jobs of this call fail
                report.results.extend(failure(by_id[job_id], error, "DescribeJobs") for job_id in ids)
                by_id = {job_id: change for job_id, change in by_id.items() if job_id not in ids}
        pending: list[_Pending] = []
        for job_id, change in by_id.items():
            key, priority = change.record.key, change.priority
            job = described.get(job_id)
            if job is None:
                reason = (
                    f"Batch job {job_id} not found (DescribeJobs); it may have aged out of Batch's history"
                )
                report.results.append(ApplyResult(key, Outcome.FAILED, priority, reason))
                continue
            if not is_enabled(job.get("tags")):
                reason = NOT_ENABLED
                report.results.append(ApplyResult(key, Outcome.SKIPPED, priority, reason))
                continue
            share = change.record.share_identifier or change.record.block.share_identifier
            share = share or job.get("shareIdentifier")
            queue = change.record.job_queue or job.get("jobQueue")
            if not share or not queue:
                reason = (
                    "no share identifier or job queue: submit the job to a fair-share queue with its own "
                    "shareIdentifier (osprey block share_identifier, one per job)"
                )
                report.results.append(ApplyResult(key, Outcome.FAILED, priority, reason))
                continue
            if parse_team_share(str(share)) is not None:
                # Its weight is the team fold's, over all of the share's jobs (team_shares), not this job's.
                reason = (
                    f"share identifier {share} is a team share; its weight comes from the team's usage "
                    "(team_shares.fold_weights), which this applier does not write yet"
                )
                report.results.append(ApplyResult(key, Outcome.SKIPPED, priority, reason))
                continue
            pending.append(_Pending(change, str(share), str(queue), weight_factor(priority)))
        return pending

    def _resolve_policies(self, pending: list[_Pending], report: ApplyReport) -> dict[str, list[_Pending]]:
        """Group jobs by the scheduling policy of their queue (DescribeJobQueues, 100 per call)."""
        queues = list(dict.fromkeys(item.queue for item in pending))
        policy_of: dict[str, str | None] = {}
        failed_queues: dict[str, BaseException] = {}
        for names in _chunks(queues):
            try:
                for queue in self.client.describe_job_queues(jobQueues=names).get("jobQueues", ()):
                    policy = queue.get("schedulingPolicyArn")
                    policy_of[queue["jobQueueArn"]] = policy
                    policy_of[queue["jobQueueName"]] = policy
            except Exception as error:  # only the jobs of these queues fail
                failed_queues.update(dict.fromkeys(names, error))
        grouped: dict[str, list[_Pending]] = {}
        for item in pending:
            if item.queue in failed_queues:
                report.results.append(failure(item.change, failed_queues[item.queue], "DescribeJobQueues"))
                continue
            policy = policy_of.get(item.queue)
            if not policy:
                reason = (
                    f"job queue {item.queue} has no fair-share scheduling policy; attach one "
                    "(CreateSchedulingPolicy, UpdateJobQueue schedulingPolicyArn) so share weights take effect"
                )
                report.results.append(
                    ApplyResult(item.change.record.key, Outcome.FAILED, item.change.priority, reason)
                )
                continue
            grouped.setdefault(policy, []).append(item)
        return grouped

    def _update_policy(
        self,
        policy_arn: str,
        jobs: list[_Pending],
        report: ApplyReport,
        may_write: Callable[[], bool],
        owners: dict[tuple[str, str], JobKey] | None = None,
    ) -> None:
        try:
            [policy] = self.client.describe_scheduling_policies(arns=[policy_arn])["schedulingPolicies"]
        except Exception as error:  # only the jobs of this policy fail
            report.results.extend(
                failure(item.change, error, f"DescribeSchedulingPolicies {policy_arn}") for item in jobs
            )
            return
        fairshare = dict(policy.get("fairsharePolicy") or {})
        distribution = [dict(entry) for entry in fairshare.get("shareDistribution") or ()]
        index = {str(entry["shareIdentifier"]): entry for entry in distribution}
        accepted = self._accept(jobs, distribution, report)
        changed = False
        claims: list[ShareEntry] = []
        foreign: list[_Pending] = []
        for item in accepted:
            entry = index.get(item.share)
            owner = None if owners is None else owners.get((policy_arn, item.share))
            mine = owner is not None or (policy_arn, item.share) in self._created
            if entry is not None and not mine and entry.get("weightFactor") != item.weight:
                # A team's own entry (or one of another tool): Osprey never changes what it did not create.
                foreign.append(item)
                continue
            if entry is None or (owner is not None and owner != item.change.record.key):
                # Osprey's entry (new, or left by an earlier job with the same identifier): this job's now.
                claims.append(ShareEntry(policy_arn, item.share, item.change.record.key))
            if entry is None:
                entry = {"shareIdentifier": item.share}
                distribution.append(entry)
                index[item.share] = entry
            if entry.get("weightFactor") != item.weight:
                entry["weightFactor"] = item.weight
                changed = True
        for item in foreign:
            reason = (
                f"share identifier {item.share} is an entry of the scheduling policy that Osprey did not create; "
                "Osprey never changes it: submit the job with a share identifier of its own, or with its team's "
                "Osprey share (osprey.batch.team_share)"
            )
            report.results.append(
                ApplyResult(item.change.record.key, Outcome.SKIPPED, item.change.priority, reason)
            )
        accepted = [item for item in accepted if item not in foreign]
        if not accepted:
            return
        if claims and self.ledger is not None:
            try:  # before the policy update: an entry in the policy is always one the ledger knows
                self.ledger.add(claims)
            except Exception as error:
                report.results.extend(
                    failure(item.change, error, "recording the share entry") for item in accepted
                )
                return
        if changed:
            # As late as possible: between this check and the update only milliseconds pass.
            if not may_write():
                logger.warning("fence lost: scheduling policy not updated", extra={"policy": policy_arn})
                report.fence_lost = True
                report.deferred.extend(item.change.record.key for item in accepted)
                return
            fairshare["shareDistribution"] = distribution
            try:
                self.client.update_scheduling_policy(arn=policy_arn, fairsharePolicy=fairshare)
            except Exception as error:  # only the jobs of this policy fail
                report.writes += 1
                report.results.extend(
                    failure(item.change, error, f"UpdateSchedulingPolicy {policy_arn}") for item in accepted
                )
                return
            report.writes += 1
            self._created.update((policy_arn, claim.share) for claim in claims)
            logger.info("scheduling policy updated", extra={"policy": policy_arn, "jobs": len(accepted)})
        for item in accepted:
            report.results.append(
                ApplyResult(
                    item.change.record.key,
                    Outcome.APPLIED,
                    item.change.priority,
                    "written" if changed else "already set",
                    native_value=f"{item.share}={item.weight}",
                )
            )

    def housekeep(self, may_write: Callable[[], bool]) -> ApplyReport:
        """Take the entries of finished jobs out of their scheduling policies (one UpdateSchedulingPolicy per
        policy that has any), then out of the ledger. Failures are logged and retried next cycle."""
        report = ApplyReport()
        if self.ledger is None:
            return report
        try:
            finished = self.ledger.finished(self.ledger.entries())
        except Exception as error:
            logger.warning("share ledger unreadable; pruning next cycle", extra={"error": repr(error)})
            return report
        by_policy: dict[str, list[ShareEntry]] = {}
        for entry in finished:
            by_policy.setdefault(entry.policy_arn, []).append(entry)
        for policy_arn, entries in by_policy.items():
            if report.fence_lost:
                break
            try:
                self._prune(self.ledger, policy_arn, entries, report, may_write)
            except Exception as error:  # this policy's entries wait for the next cycle; the others go on
                logger.warning("share entries not pruned", extra={"policy": policy_arn, "error": repr(error)})
        return report

    def _prune(
        self,
        ledger: ShareLedgerPort,
        policy_arn: str,
        entries: list[ShareEntry],
        report: ApplyReport,
        may_write: Callable[[], bool],
    ) -> None:
        policies = self.client.describe_scheduling_policies(arns=[policy_arn])["schedulingPolicies"]
        if policies:
            fairshare = dict(policies[0].get("fairsharePolicy") or {})
            distribution = list(fairshare.get("shareDistribution") or ())
            gone = {entry.share for entry in entries}
            kept = [entry for entry in distribution if str(entry.get("shareIdentifier")) not in gone]
            if len(kept) < len(distribution):
                if not may_write():
                    report.fence_lost = True
                    return
                fairshare["shareDistribution"] = kept
                report.writes += 1
                self.client.update_scheduling_policy(arn=policy_arn, fairsharePolicy=fairshare)
                report.pruned += len(distribution) - len(kept)
                logger.info(
                    "finished jobs' shares pruned", extra={"policy": policy_arn, "shares": sorted(gone)}
                )
        ledger.remove(entries)  # a deleted policy has nothing left to prune

    @staticmethod
    def _accept(
        jobs: list[_Pending], distribution: list[dict[str, Any]], report: ApplyReport
    ) -> list[_Pending]:
        """The jobs whose weights can be written: no shared identifier, no wildcard overlap."""
        users: dict[str, list[_Pending]] = {}
        for item in jobs:
            users.setdefault(item.share, []).append(item)
        accepted: list[_Pending] = []
        for share, items in users.items():
            wildcard = _covered_by_wildcard(share, distribution)
            if len(items) > 1:
                names = ", ".join(item.change.record.native_id for item in items)
                reason = f"share identifier {share} is used by several Osprey jobs ({names}); give each job its own"
            elif wildcard is not None:
                reason = (
                    f"share identifier {share} overlaps the policy's wildcard entry {wildcard}, which Batch "
                    "rejects; use an identifier outside that prefix"
                )
            else:
                accepted.extend(items)
                continue
            report.results.extend(
                ApplyResult(item.change.record.key, Outcome.FAILED, item.change.priority, reason)
                for item in items
            )
        return accepted
