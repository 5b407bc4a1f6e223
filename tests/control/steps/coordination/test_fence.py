"""Fencing: the lease's token goes up on every acquire, and an execution whose token is no longer the lease's
writes nothing in derive and apply (moto DynamoDB) and makes no UpdateSchedulingPolicy."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from osprey_control.backends.batch import BatchShareApplier
from osprey_control.contract import OspreyBlock
from osprey_control.derivation import JobMetrics, compile_policy
from osprey_control.policy import load_policies
from osprey_control.registry import Backend, JobKey, JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.fence import Fence, FenceLostError
from osprey_control.registry.lease import CycleLease
from osprey_control.registry.observation import JobObservation
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.derive import derive_shard
from tests.conftest import REPO_ROOT
from tests.control.steps.coordination.conftest import T0, TABLE

POLICY_ARN = "arn:aws:batch:us-east-1:123456789012:scheduling-policy/osprey"
POLICIES = {p.name: compile_policy(p) for p in load_policies([REPO_ROOT / "policies"])}


class Policies:
    def get(self, name: str) -> Any:
        return POLICIES[name]


class FakeBatch:
    """Batch as the share applier reads it: one opted-in job per share on one fair-share queue. Records every
    call; ``on_describe_policy`` runs inside DescribeSchedulingPolicies (a takeover in the read-check window)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.on_describe_policy: Any = None

    def describe_jobs(self, jobs: list[str]) -> dict[str, Any]:
        self.calls.append("DescribeJobs")
        described = [
            {
                "jobId": job,
                "tags": {"osprey:enabled": "true"},
                "shareIdentifier": f"osprey-job-{job}",
                "jobQueue": "gpu",
            }
            for job in jobs
        ]
        return {"jobs": described}

    def describe_job_queues(self, jobQueues: list[str]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.calls.append("DescribeJobQueues")
        return {
            "jobQueues": [{"jobQueueArn": "gpu", "jobQueueName": "gpu", "schedulingPolicyArn": POLICY_ARN}]
        }

    def describe_scheduling_policies(self, arns: list[str]) -> dict[str, Any]:
        self.calls.append("DescribeSchedulingPolicies")
        if self.on_describe_policy is not None:
            self.on_describe_policy()
        return {"schedulingPolicies": [{"arn": POLICY_ARN, "fairsharePolicy": {"shareDistribution": []}}]}

    def update_scheduling_policy(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("UpdateSchedulingPolicy")
        return {}


def add_job(registry: JobRegistry, name: str) -> JobKey:
    observed = JobObservation(
        backend=Backend.BATCH,
        native_id=name,
        name=name,
        block=OspreyBlock(priority_derivation_profile="training-policy"),
        status=JobStatus.RUNNING,
        event_time=T0,
    )
    return registry.apply_observation(observed).record.key


def taken_over(lease: CycleLease, registry: JobRegistry) -> Fence:
    """The fence of "stale", whose lease expired and was taken by "next" (token 1 → 2)."""
    stale = lease.acquire("stale", ttl_seconds=600, now=T0)
    assert lease.acquire("next", ttl_seconds=600, now=T0 + timedelta(seconds=601)).acquired
    assert stale.token is not None
    return Fence(TABLE, stale.token, registry.client)


def test_given_acquires_and_releases_then_the_token_only_ever_goes_up(lease: CycleLease) -> None:
    # Given a free lease, when executions acquire, release, retry and take over an expired one
    first = lease.acquire("cycle-1", ttl_seconds=600, now=T0)
    retried = lease.acquire("cycle-1", ttl_seconds=600, now=T0 + timedelta(seconds=1))
    refused = lease.acquire("cycle-2", ttl_seconds=600, now=T0 + timedelta(seconds=2))
    assert lease.release("cycle-1")
    after_release = lease.acquire("cycle-2", ttl_seconds=600, now=T0 + timedelta(seconds=3))
    takeover = lease.acquire("cycle-3", ttl_seconds=600, now=T0 + timedelta(seconds=604))

    # Then every successful acquire got a higher token (a release keeps the item), a refused one none
    assert [first.token, retried.token, after_release.token, takeover.token] == [1, 2, 3, 4]
    assert refused.token is None
    assert not refused.acquired
    assert takeover.to_dict()["token"] == 4


def test_given_a_lost_lease_then_registry_writes_raise_fence_lost_and_write_nothing(
    registry: JobRegistry, lease: CycleLease
) -> None:
    # Given a job with a derived priority to apply, and an execution whose lease was taken over
    key = add_job(registry, "train")
    current = registry.get(key)
    assert current is not None
    decided = registry.record_decision(key, {"reason": "r"}, 60, current.version, T0)
    stale = taken_over(lease, registry)

    # When that execution records a decision, an applied priority or an apply failure
    with pytest.raises(FenceLostError):
        registry.record_decision(key, {"reason": "s"}, 70, decided.version, T0, fence=stale)
    with pytest.raises(FenceLostError):
        registry.record_applied(key, 60, T0, fence=stale)
    with pytest.raises(FenceLostError):
        registry.record_apply_failure(key, 60, "x", permanent=True, now=T0, fence=stale)

    # Then the job is as the decision left it, with one history item
    assert registry.get(key) == decided
    assert len(registry.history(key)) == 1
    # ... while the holder's fence writes
    holder = Fence(TABLE, 2, registry.client)
    assert holder.holds()
    assert not stale.holds()
    applied = registry.record_applied(key, 60, T0, fence=holder)
    assert applied is not None
    assert applied.applied_priority == 60


def test_given_a_lost_lease_when_a_shard_derives_then_no_decision_is_written(
    registry: JobRegistry, lease: CycleLease
) -> None:
    # Given three running jobs, and a derive step whose execution lost the lease
    keys = [add_job(registry, f"job-{index}") for index in range(3)]
    records = registry.list_active()
    stale = taken_over(lease, registry)
    metrics = {key: JobMetrics(job_id=str(key), backend="batch", name=key.native_id) for key in keys}

    # When the shard derives
    result = derive_shard(records, metrics, Policies(), registry, None, now=T0, fence=stale)

    # Then the fence stopped it: nothing was written, and it says so
    assert result.fence_lost
    assert {outcome.error_kind for outcome in result.outcomes} <= {"fence-lost"}
    assert len(result.outcomes) + len(result.deferred) == 3
    assert [registry.get(key) for key in keys] == records_by_key(registry, records, keys)
    assert all(registry.history(key) == [] for key in keys)


def records_by_key(registry: JobRegistry, records: list[Any], keys: list[JobKey]) -> list[Any]:
    by_key = {record.key: record for record in records}
    return [by_key[key] for key in keys]


def pending_job(registry: JobRegistry, name: str) -> JobKey:
    key = add_job(registry, name)
    current = registry.get(key)
    assert current is not None
    registry.record_decision(key, {"reason": "r"}, 60, current.version, T0)
    return key


def test_given_a_lost_lease_when_the_apply_step_runs_then_batch_and_the_registry_are_untouched(
    registry: JobRegistry, lease: CycleLease
) -> None:
    # Given a Batch job whose derived priority is pending, and an apply step whose execution lost the lease
    key = pending_job(registry, "train")
    before = registry.get(key)
    stale = taken_over(lease, registry)
    batch = FakeBatch()

    # When it applies
    report = apply_cycle([{"shard": None}], registry, [BatchShareApplier(batch)], now=T0, fence=stale)

    # Then it made no Batch call, recorded nothing (no apply failure either) and reported the lost fence
    assert batch.calls == []
    assert report.fence_lost
    assert report.deferred == [key]
    assert report.failed == []
    assert registry.get(key) == before


def test_given_a_takeover_between_the_policy_read_and_its_update_then_the_update_is_skipped(
    registry: JobRegistry, lease: CycleLease
) -> None:
    # Given an apply step that holds the lease when it starts ...
    key = pending_job(registry, "train")
    before = registry.get(key)
    holder = lease.acquire("slow", ttl_seconds=600, now=T0)
    assert holder.token is not None
    fence = Fence(TABLE, holder.token, registry.client)
    batch = FakeBatch()
    # ... and loses it while it reads the scheduling policy (its lease expired and another execution took it)
    batch.on_describe_policy = lambda: lease.acquire("next", ttl_seconds=600, now=T0 + timedelta(seconds=601))

    # When it applies
    report = apply_cycle([{"shard": None}], registry, [BatchShareApplier(batch)], now=T0, fence=fence)

    # Then the policy was read but not written, and the job stays pending without an apply failure
    assert batch.calls == ["DescribeJobs", "DescribeJobQueues", "DescribeSchedulingPolicies"]
    assert report.fence_lost
    assert report.deferred == [key]
    assert report.writes == 0
    assert registry.get(key) == before


def test_given_the_lease_still_held_then_the_fenced_apply_step_writes_as_without_a_fence(
    registry: JobRegistry, lease: CycleLease
) -> None:
    # Given a pending Batch job and the execution holding the lease
    key = pending_job(registry, "train")
    holder = lease.acquire("cycle-1", ttl_seconds=600, now=T0)
    assert holder.token is not None
    batch = FakeBatch()

    # When it applies with its fence
    fence = Fence(TABLE, holder.token, registry.client)
    report = apply_cycle([{"shard": None}], registry, [BatchShareApplier(batch)], now=T0, fence=fence)

    # Then Batch got the update and the registry the applied priority
    assert batch.calls[-1] == "UpdateSchedulingPolicy"
    assert not report.fence_lost
    assert len(report.applied) == 1
    recorded = registry.get(key)
    assert recorded is not None
    assert recorded.applied_priority == 60
    assert not recorded.apply_pending()
