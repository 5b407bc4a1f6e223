"""Issue 28 item 1, in moto: an old execution's UpdateSchedulingPolicy that lands after a newer execution applied
(the old one checked its fence once before the call, then the request was carried out late) is repaired by the
next cycle, so Batch ends with the newer decision."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.backends.batch import BatchShareApplier, weight_factor
from osprey_control.contract import OspreyBlock
from osprey_control.registry import Backend, JobKey, JobStatus, ShareLedger, WriteIntents
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.fence import Fence
from osprey_control.registry.lease import CycleLease
from osprey_control.registry.observation import JobObservation
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.in_doubt import IN_DOUBT_SLACK_S
from tests.control.steps.coordination.conftest import T0, TABLE

ENABLED = {"osprey:enabled": "true", "osprey:policy": "training-policy"}
SHARE = "job-train"
LEASE_S = 300


class World:
    """moto Batch (a fair-share queue whose policy has a team's own share) and the moto registry."""

    def __init__(self) -> None:
        self.dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        self.registry = JobRegistry(TABLE, self.dynamodb, shards=4)
        self.registry.create_table()
        self.lease = CycleLease(TABLE, self.dynamodb)
        self.batch = boto3.client("batch", region_name="us-east-1")
        role = boto3.client("iam", region_name="us-east-1").create_role(
            RoleName="batch", AssumeRolePolicyDocument="{}"
        )["Role"]["Arn"]
        environment = self.batch.create_compute_environment(
            computeEnvironmentName="gpu", type="UNMANAGED", state="ENABLED", serviceRole=role
        )["computeEnvironmentArn"]
        self.policy = self.batch.create_scheduling_policy(
            name="fair",
            fairsharePolicy={"shareDistribution": [{"shareIdentifier": "analytics", "weightFactor": 0.5}]},
        )["arn"]
        self.queue = self.batch.create_job_queue(
            jobQueueName="ml",
            state="ENABLED",
            priority=1,
            schedulingPolicyArn=self.policy,
            computeEnvironmentOrder=[{"order": 1, "computeEnvironment": environment}],
        )["jobQueueArn"]
        self.batch.register_job_definition(
            jobDefinitionName="train",
            type="container",
            containerProperties={"image": "train:1", "vcpus": 1, "memory": 512},
        )

    def job(self) -> JobKey:
        job_id = self.batch.submit_job(
            jobName="train", jobQueue=self.queue, jobDefinition="train", shareIdentifier=SHARE, tags=ENABLED
        )["jobId"]
        observed = JobObservation(
            backend=Backend.BATCH,
            native_id=job_id,
            name="train",
            block=OspreyBlock(priority_derivation_profile="training-policy"),
            status=JobStatus.RUNNING,
            event_time=T0,
            job_queue=self.queue,
            share_identifier=SHARE,
            tags=ENABLED,
        )
        return self.registry.apply_observation(observed).record.key

    def decide(self, key: JobKey, priority: int, fence: Fence) -> None:
        current = self.registry.get(key)
        assert current is not None
        self.registry.record_decision(
            key, {"reason": f"p{priority}"}, priority, current.version, T0, fence=fence
        )

    def take(self, owner: str, at: datetime) -> Fence:
        state = self.lease.acquire(owner, ttl_seconds=LEASE_S, now=at)
        assert state.acquired
        assert state.token is not None
        return Fence(TABLE, state.token, self.dynamodb)

    def applier(self, client: Any = None) -> BatchShareApplier:
        return BatchShareApplier(client or self.batch, ShareLedger(TABLE, self.dynamodb))

    def weight(self) -> float:
        [policy] = self.batch.describe_scheduling_policies(arns=[self.policy])["schedulingPolicies"]
        weights = {
            e["shareIdentifier"]: e["weightFactor"] for e in policy["fairsharePolicy"]["shareDistribution"]
        }
        return float(weights[SHARE])


class LateBatch:
    """The old execution's Batch client: its UpdateSchedulingPolicy is carried out only after ``meanwhile``
    (a botocore retry of a request the service did not answer in time, landing after the takeover)."""

    def __init__(self, client: Any, meanwhile: Callable[[], None]) -> None:
        self.client, self.meanwhile = client, meanwhile
        self.meta = client.meta

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def update_scheduling_policy(self, **kwargs: Any) -> Any:
        self.meanwhile()
        return self.client.update_scheduling_policy(**kwargs)


@pytest.fixture
def world() -> Iterator[World]:
    with mock_aws(config={"batch": {"use_docker": False}}):
        yield World()


def test_an_old_executions_late_policy_update_is_repaired_by_the_next_cycle(world: World) -> None:
    # Given a Batch job derived to 40 by execution "old", which holds the lease
    key = world.job()
    old = world.take("old", T0)
    world.decide(key, 40, old)

    def newer_execution() -> None:
        # ... whose lease expired while its UpdateSchedulingPolicy was in flight: "new" takes the lease,
        # derives 80, applies it and records it applied
        new = world.take("new", T0 + timedelta(seconds=LEASE_S + 1))
        world.decide(key, 80, new)
        report = apply_cycle([{"shard": None}], world.registry, [world.applier()], now=T0, fence=new)
        assert [result.job for result in report.applied] == [key]
        assert world.weight() == weight_factor(80)
        assert world.lease.release("new")

    # When the old execution's update lands after that
    late = apply_cycle(
        [{"shard": None}],
        world.registry,
        [world.applier(LateBatch(world.batch, newer_execution))],
        now=T0,
        fence=old,
    )

    # Then (the failure of issue 28) Batch holds the old weight while the registry says 80 is applied, and the
    # old execution could neither record its outcome nor say that its write was over
    assert late.fence_lost
    assert world.weight() == weight_factor(40)
    record = world.registry.get(key)
    assert record is not None
    assert (record.derived_priority, record.applied_priority) == (80, 80)
    assert not record.apply_pending()
    [left] = WriteIntents(TABLE, world.dynamodb).open()
    assert (left.token, left.keys) == (old.token, None)

    # When the next cycle applies (nothing pending), while the old request could in principle still land
    soon = world.take("next", T0 + timedelta(seconds=2 * LEASE_S))
    apply_cycle([{"shard": None}], world.registry, [world.applier()], now=datetime.now(UTC), fence=soon)

    # Then Batch holds the newer decision again, and the intent stays for a later cycle to repair once more
    assert world.weight() == weight_factor(80)
    assert [intent.token for intent in WriteIntents(TABLE, world.dynamodb).open()] == [old.token]

    # When a cycle runs after the old request's window (the lease's expiry and the slack)
    world.lease.release("next")
    later = world.take("later", T0 + timedelta(seconds=3 * LEASE_S))
    after = datetime.now(UTC) + timedelta(seconds=left.until - datetime.now(UTC).timestamp() + 1)
    apply_cycle([{"shard": None}], world.registry, [world.applier()], now=after, fence=later)

    # Then the backend still equals the newer decision, the registry is unchanged and the intent is gone
    assert world.weight() == weight_factor(80)
    assert WriteIntents(TABLE, world.dynamodb).open() == []
    final = world.registry.get(key)
    assert final is not None
    assert (final.derived_priority, final.applied_priority) == (80, 80)
    assert left.until >= datetime.now(UTC).timestamp() + IN_DOUBT_SLACK_S - 5
