"""The cycle's changed Batch jobs, resolved to what their shares' weights need: live tags, share identifier, queue
(DescribeJobs), the scheduling policy of the queue, and which of them can be written at all.

A job's own share takes the weight of its priority (:func:`weight_factor`); a job in Osprey's team share
(``osprey-<team>-g<class>``) takes its share's team fold instead (:mod:`.team_fold`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from osprey_control.backends.actuation import (
    NOT_ENABLED,
    ApplyReport,
    ApplyResult,
    Outcome,
    PriorityChange,
    failure,
    is_enabled,
)
from osprey_control.backends.batch.cycle import Cycle, chunks
from osprey_control.backends.batch.distribution import PolicyEdit
from osprey_control.backends.batch.team_shares import TeamShare, parse_team_share
from osprey_control.registry import JobKey

__all__ = ["MAX_WEIGHT", "MIN_WEIGHT", "weight_factor"]

# Batch accepts weightFactor 0.0001..999.9999 (botocore model, ShareAttributes); lower gets more capacity.
MIN_WEIGHT = 1.0  # priority 100: the same weight as a share Batch has no entry for
MAX_WEIGHT = 100.0  # priority 0: a hundredth of the capacity of a priority-100 job


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


@dataclass(slots=True)
class Pending:
    change: PriorityChange
    share: str
    queue: str
    team: TeamShare | None  # Osprey's team share (weight from the fold), else None (weight from the priority)

    @property
    def weight(self) -> float:
        return weight_factor(self.change.priority)


def foreign(share: str) -> str:
    return (
        f"share identifier {share} is an entry of the scheduling policy that Osprey did not create; Osprey "
        "never changes it: submit the job with a share of its own (osprey.batch.own_share) or its team's Osprey "
        "share (osprey.batch.team_share)"
    )


def held_by(share: str, owner: JobKey) -> str:
    return (
        f"share identifier {share} is held by job {owner.native_id}, which is still active; Osprey never moves one "
        "job's share for another: give each job a share of its own (osprey.batch.own_share) or its team's Osprey "
        "share (osprey.batch.team_share)"
    )


def resolve_jobs(client: Any, changes: list[PriorityChange], report: ApplyReport) -> list[Pending]:
    """Live tags, share identifier and queue of each job (DescribeJobs, 100 per call)."""
    described: dict[str, dict[str, Any]] = {}
    by_id = {change.record.native_id: change for change in changes}
    for ids in chunks(list(by_id)):
        try:
            for job in client.describe_jobs(jobs=ids).get("jobs", ()):
                described[job["jobId"]] = job
        except Exception as error:  # only the jobs of this call fail
            report.results.extend(failure(by_id[job_id], error, "DescribeJobs") for job_id in ids)
            by_id = {job_id: change for job_id, change in by_id.items() if job_id not in ids}
    pending: list[Pending] = []
    for job_id, change in by_id.items():
        key, priority = change.record.key, change.priority
        job = described.get(job_id)
        if job is None:
            reason = f"Batch job {job_id} not found (DescribeJobs); it may have aged out of Batch's history"
            report.results.append(ApplyResult(key, Outcome.FAILED, priority, reason))
            continue
        if not is_enabled(job.get("tags")):
            report.results.append(ApplyResult(key, Outcome.SKIPPED, priority, NOT_ENABLED))
            continue
        share = change.record.share_identifier or change.record.block.share_identifier
        share = share or job.get("shareIdentifier")
        queue = change.record.job_queue or job.get("jobQueue")
        if not share or not queue:
            reason = (
                "no share identifier or job queue: submit the job to a fair-share queue with its team's "
                "Osprey share (osprey.batch.team_share) or a share identifier of its own"
            )
            report.results.append(ApplyResult(key, Outcome.FAILED, priority, reason))
            continue
        pending.append(Pending(change, str(share), str(queue), parse_team_share(str(share))))
    return pending


def group_by_policy(pending: list[Pending], cycle: Cycle, report: ApplyReport) -> dict[str, list[Pending]]:
    """The jobs by the scheduling policy of their queue."""
    grouped: dict[str, list[Pending]] = {}
    for item in pending:
        if item.queue in cycle.queue_errors:
            report.results.append(failure(item.change, cycle.queue_errors[item.queue], "DescribeJobQueues"))
            continue
        policy = cycle.policy_of.get(item.queue)
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


def accept(jobs: list[Pending], edit: PolicyEdit, report: ApplyReport) -> list[Pending]:
    """The jobs whose shares can be written: a job share of one job only, no wildcard overlap."""
    users: dict[str, list[Pending]] = {}
    for item in jobs:
        users.setdefault(item.share, []).append(item)
    accepted: list[Pending] = []
    for share, items in users.items():
        wildcard = edit.wildcard_over(share)
        if wildcard is not None:
            reason = (
                f"share identifier {share} overlaps the policy's wildcard entry {wildcard}, which Batch "
                "rejects; use an identifier outside that prefix"
            )
        elif len(items) > 1 and items[0].team is None:
            names = ", ".join(item.change.record.native_id for item in items)
            reason = (
                f"share identifier {share} is used by several Osprey jobs ({names}); give each job its "
                "own, or use the team's Osprey share (osprey.batch.team_share)"
            )
        else:
            accepted.extend(items)
            continue
        report.results.extend(
            ApplyResult(item.change.record.key, Outcome.FAILED, item.change.priority, reason)
            for item in items
        )
    return accepted
