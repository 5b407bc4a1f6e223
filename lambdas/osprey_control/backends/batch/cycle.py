"""What the Batch applier reads once per cycle, before it edits any scheduling policy: the active jobs of
Osprey's team shares (the registry's listing), the share ledger (which entries Osprey created, which of them
belong to finished jobs) and the scheduling policy of every queue involved (DescribeJobQueues).

Read once and shared by the apply call and the housekeeping after it, so that each policy gets at most one
``UpdateSchedulingPolicy`` per cycle: the policies of the cycle's changed jobs are written by the apply call
(weights, team shares and pruning together), the others by the housekeeping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from osprey_control.backends.batch.ownership import is_osprey_identifier
from osprey_control.backends.batch.team_fold import Member, team_member
from osprey_control.backends.batch.team_shares import parse_team_share
from osprey_control.registry import JobKey, JobRecord, ShareEntry

__all__ = ["ActiveJobs", "ShareLedgerPort"]

_DESCRIBE_BATCH = 100  # DescribeJobs, DescribeJobQueues and DescribeSchedulingPolicies take at most 100 names

ActiveJobs = Callable[[], Sequence[JobRecord]]
"""The registry's active Batch jobs (the deployment's listing: one Query per shard of the active index)."""


class ShareLedgerPort(Protocol):
    """The registry's record of the share entries Osprey added (:class:`osprey_control.registry.shares.ShareLedger`)."""

    def entries(self) -> list[ShareEntry]: ...

    def add(self, entries: Iterable[ShareEntry]) -> None: ...

    def remove(self, entries: Iterable[ShareEntry]) -> None: ...

    def finished(self, entries: Iterable[ShareEntry]) -> list[ShareEntry]: ...


def chunks(items: Sequence[str]) -> Iterable[list[str]]:
    for offset in range(0, len(items), _DESCRIBE_BATCH):
        yield list(items[offset : offset + _DESCRIBE_BATCH])


@dataclass
class Cycle:
    """One cycle's reads. ``members`` is None when the listing failed or the deployment gives none
    (``listing_error`` says why): team shares are then neither written nor pruned. ``owners`` is None without
    a ledger, or when it could not be read (``ledger_error``)."""

    members: list[Member] | None = None
    listing_error: str | None = None
    owners: dict[tuple[str, str], JobKey] | None = None
    ledger_error: BaseException | None = None
    finished: list[ShareEntry] = field(default_factory=list)  # per-job entries whose job has ended
    team_entries: list[ShareEntry] = field(default_factory=list)  # the ledger's team-share entries
    # Entries an earlier Osprey created for identifiers that are not Osprey's (``team-b``): they weigh jobs that
    # never opted in, so they are taken out at once, whatever their job does (:mod:`.ownership`).
    legacy: list[ShareEntry] = field(default_factory=list)
    policy_of: dict[str, str | None] = field(default_factory=dict)  # queue (name or ARN) -> policy ARN
    queue_errors: dict[str, BaseException] = field(default_factory=dict)
    synced: set[str] = field(default_factory=set)  # policies this cycle has already edited

    def members_of(self, policy_arn: str) -> list[Member]:
        return [
            member
            for member in self.members or ()
            if member.record.job_queue and self.policy_of.get(member.record.job_queue) == policy_arn
        ]

    def prunable(self, policy_arn: str) -> list[ShareEntry]:
        """Osprey's entries of ``policy_arn`` to take out: a finished job's own share, and a team share with no
        active job left (only when the listing was read: an unread listing prunes no team share)."""
        gone = [entry for entry in (*self.finished, *self.legacy) if entry.policy_arn == policy_arn]
        if self.members is not None:
            live = {member.share.identifier for member in self.members_of(policy_arn)}
            gone += [
                entry
                for entry in self.team_entries
                if entry.policy_arn == policy_arn and entry.share not in live
            ]
        return gone

    def policies(self) -> set[str]:
        """Every policy with work this cycle: team shares to write, entries to prune."""
        found = {self.policy_of.get(m.record.job_queue or "") for m in self.members or ()}
        found |= {entry.policy_arn for entry in (*self.finished, *self.legacy)}
        found |= {entry.policy_arn for entry in self.team_entries}
        return {policy for policy in found if policy}


def read_cycle(active_jobs: ActiveJobs | None, ledger: ShareLedgerPort | None) -> Cycle:
    """The listing and the ledger (queues are resolved by :func:`resolve_queues`)."""
    cycle = Cycle()
    if active_jobs is None:
        cycle.listing_error = (
            "the deployment gives the Batch applier no listing of the registry's active jobs"
        )
    else:
        try:
            found = (team_member(record) for record in active_jobs())
            cycle.members = [member for member in found if member is not None]
        except Exception as error:
            cycle.listing_error = (
                f"listing the registry's active jobs failed ({type(error).__name__}: {error})"
            )
    if ledger is not None:
        try:
            entries = ledger.entries()
            cycle.owners = {(entry.policy_arn, entry.share): entry.job for entry in entries}
            team = [entry for entry in entries if parse_team_share(entry.share) is not None]
            own = [
                entry
                for entry in entries
                if parse_team_share(entry.share) is None and is_osprey_identifier(entry.share)
            ]
            cycle.legacy = [entry for entry in entries if not is_osprey_identifier(entry.share)]
            cycle.team_entries = team
            cycle.finished = ledger.finished(own) if own else []
        except Exception as error:
            cycle.ledger_error = error
            cycle.owners, cycle.team_entries, cycle.finished, cycle.legacy = None, [], [], []
    return cycle


def resolve_queues(client: Any, cycle: Cycle, queues: Iterable[str]) -> None:
    """The scheduling policy of each queue not resolved yet (DescribeJobQueues, 100 per call)."""
    todo = [queue for queue in dict.fromkeys(queues) if queue and queue not in cycle.policy_of]
    for names in chunks(todo):
        try:
            for queue in client.describe_job_queues(jobQueues=names).get("jobQueues", ()):
                policy = queue.get("schedulingPolicyArn")
                cycle.policy_of[queue["jobQueueArn"]] = policy
                cycle.policy_of[queue["jobQueueName"]] = policy
        except Exception as error:  # only the jobs of these queues fail
            cycle.queue_errors.update(dict.fromkeys(names, error))
