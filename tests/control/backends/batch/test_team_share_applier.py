"""The production Batch path writes the team fold's weights of Osprey's team shares, every cycle, against moto's
Batch (which keeps scheduling policies as written) and DynamoDB (the registry, its share ledger and the lease's
fence): the apply step end to end, as the apply Lambda runs it."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from moto import mock_aws

from osprey_control.backends import Deployment, Outcome
from osprey_control.backends.batch import DRIVER, BatchShareApplier
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobRecord, JobStatus
from osprey_control.registry.allocation import AllocationMark, Allocations
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.fence import Fence
from osprey_control.registry.items import record_to_item
from osprey_control.registry.lease import CycleLease
from osprey_control.registry.shares import ShareLedger
from osprey_control.steps.apply import apply_cycle

TABLE = "osprey-registry"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
DECAY_S = 3600
ENABLED = {"osprey:enabled": "true", "osprey:policy": "training-policy"}
BLOCK = parse_block({"priority_derivation_profile": "training-policy"})


class World:
    """A fair-share queue whose policy holds team vision's own entry (weight 2.0), another team's and an
    ``osprey-ml-g0`` entry that someone other than Osprey created; the registry; the apply step's fence."""

    def __init__(self) -> None:
        self.batch = boto3.client("batch", region_name="us-east-1")
        role = boto3.client("iam", region_name="us-east-1").create_role(
            RoleName="batch", AssumeRolePolicyDocument="{}"
        )["Role"]["Arn"]
        environment = self.batch.create_compute_environment(
            computeEnvironmentName="gpu", type="UNMANAGED", state="ENABLED", serviceRole=role
        )["computeEnvironmentArn"]
        self.policy = self.batch.create_scheduling_policy(
            name="fair",
            fairsharePolicy={
                "shareDecaySeconds": DECAY_S,
                "computeReservation": 10,
                "shareDistribution": [
                    {"shareIdentifier": "vision", "weightFactor": 2.0},
                    {"shareIdentifier": "analytics", "weightFactor": 0.5},
                    {"shareIdentifier": "osprey-ml-g0", "weightFactor": 3.0},
                ],
            },
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
        self.updates: list[dict[str, Any]] = []
        self.batch.meta.events.register(
            "provide-client-params.batch.UpdateSchedulingPolicy",
            lambda params, **_: self.updates.append(params),
        )
        self.dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        self.registry = JobRegistry(TABLE, self.dynamodb, shards=4)
        self.registry.create_table()
        self.ledger = ShareLedger(TABLE, self.dynamodb)
        self.lease = CycleLease(TABLE, self.dynamodb)
        self.now = NOW
        self.waits: list[float] = []
        # As the apply Lambda builds it: the driver, from the deployment's clients, ledger and listing.
        applier = DRIVER.applier(
            Deployment(
                clients={"batch": self.batch},
                share_ledger=self.ledger,
                active_jobs=lambda backend: self.registry.list_active(backend=backend),
            )
        )
        assert isinstance(applier, BatchShareApplier)
        applier.clock = lambda: self.now.timestamp()  # noqa: PLW0108 - self.now moves between cycles
        applier.sleep = self.waits.append
        self.applier = applier
        self.cycles = 0

    def job(
        self,
        name: str,
        share: str,
        gpus: int,
        *,
        ran_hours: float | None = None,
        applied: int = 50,
        derived: int | None = None,
    ) -> JobRecord:
        """A job submitted with ``share``: running for the last ``ran_hours`` (None: queued, never ran)."""
        job_id = self.batch.submit_job(
            jobName=name, jobQueue=self.queue, jobDefinition="train", shareIdentifier=share, tags=ENABLED
        )["jobId"]
        marks: tuple[AllocationMark, ...] = ()
        if ran_hours is not None:
            marks = (AllocationMark(at=self.now - timedelta(hours=ran_hours), running=True, gpus=gpus),)
        record = JobRecord(
            backend=Backend.BATCH,
            native_id=job_id,
            name=name,
            block=BLOCK,
            status=JobStatus.RUNNING if ran_hours is not None else JobStatus.PENDING,
            status_time=self.now,
            job_queue=self.queue,
            share_identifier=share,
            tags=ENABLED,
            requested_gpus=gpus,
            allocations=Allocations(marks=marks),
            applied_priority=applied,
            derived_priority=applied if derived is None else derived,
            last_decision={"reason": "derived"},
        )
        self.store(record)
        return record

    def store(self, record: JobRecord) -> None:
        self.dynamodb.put_item(TableName=TABLE, Item=record_to_item(record, shards=4))

    def finish(self, record: JobRecord) -> None:
        current = self.registry.get(record.key)
        assert current is not None
        ended = current.allocations.with_mark(AllocationMark(at=self.now, running=False))
        self.store(current.model_copy(update={"status": JobStatus.SUCCEEDED, "allocations": ended}))

    def cycle(self) -> Any:
        """One apply step, fenced by this cycle's lease token, as the state machine runs it."""
        self.cycles += 1
        state = self.lease.acquire(f"cycle-{self.cycles}", ttl_seconds=600, now=self.now)
        assert state.token is not None
        fence = Fence(TABLE, state.token, self.dynamodb)
        report = apply_cycle([{"shard": None}], self.registry, [self.applier], now=self.now, fence=fence)
        self.lease.release(f"cycle-{self.cycles}")
        return report

    def shares(self) -> dict[str, float]:
        [policy] = self.batch.describe_scheduling_policies(arns=[self.policy])["schedulingPolicies"]
        return {
            e["shareIdentifier"]: e["weightFactor"] for e in policy["fairsharePolicy"]["shareDistribution"]
        }


@pytest.fixture
def world() -> Iterator[World]:
    with mock_aws(config={"batch": {"use_docker": False}}):
        yield World()


def _held(gpus: int, hours: float) -> float:
    """Decayed usage of ``gpus`` GPUs held for the last ``hours`` (decay one hour): gpus x (1 - e^-h)."""
    return gpus * (1 - math.exp(-hours * 3600 / DECAY_S))


def _order(priority: int | None) -> float:
    return 1 + 0.1 * (100 - (50 if priority is None else priority)) / 100


def two_teams(world: World) -> dict[str, JobRecord]:
    """Team vision: an 8-GPU job running 2 h and one queued (its priority moving 40 -> 70) in its 5-16 GPU share,
    a 2-GPU job running 1 h in its small share. Team nlp: a 64-GPU job running 30 min and one queued (moving
    60 -> 30)."""
    return {
        "v8": world.job("v8", "osprey-vision-g1", 8, ran_hours=2),
        "v8q": world.job("v8q", "osprey-vision-g1", 8, applied=40, derived=70),
        "v2": world.job("v2", "osprey-vision-g0", 2, ran_hours=1),
        "n64": world.job("n64", "osprey-nlp-g2", 64, ran_hours=0.5),
        "n64q": world.job("n64q", "osprey-nlp-g2", 64, applied=60, derived=30),
    }


def test_team_shares_hold_the_fold_of_their_teams_usage_and_the_teams_own_entry_is_kept(world: World) -> None:
    # Given two teams' jobs in their Osprey shares, with known allocation history
    jobs = two_teams(world)

    # When the apply step runs
    report = world.cycle()

    # Then each team share holds W_team x U_team / U_share x (1 + 0.1 (100 - p) / 100), W_vision = 2.0 read from
    # the team's own entry, which (with every other entry) is unchanged
    g1, g0 = _held(8, 2), _held(2, 1)  # nlp has one share: U_team / U_share = 1
    assert world.shares() == {
        "vision": 2.0,
        "analytics": 0.5,
        "osprey-ml-g0": 3.0,
        "osprey-vision-g1": round(2.0 * (g1 + g0) / g1 * _order(70), 4),
        "osprey-vision-g0": round(2.0 * (g1 + g0) / g0 * _order(None), 4),
        "osprey-nlp-g2": round(1.0 * _order(30), 4),
    }
    # And in one UpdateSchedulingPolicy, which sent decay and reservation back as they were
    assert len(world.updates) == 1
    assert world.updates[0]["fairsharePolicy"]["computeReservation"] == 10
    # And the changed jobs are recorded applied, with the weight their share was given
    for name, priority in (("v8q", 70), ("n64q", 30)):
        record = world.registry.get(jobs[name].key)
        assert record is not None
        assert record.applied_priority == priority
        assert record.apply_failure is None
    assert {result.outcome for result in report.results} == {Outcome.APPLIED}
    assert report.by_job()[jobs["v8q"].key].native_value == (
        f"osprey-vision-g1={world.shares()['osprey-vision-g1']}"
    )
    # And Osprey recorded the entries it created (so it may change and prune them), not the teams'
    assert {entry.share for entry in world.ledger.entries()} == {
        "osprey-vision-g1",
        "osprey-vision-g0",
        "osprey-nlp-g2",
    }


def test_a_second_cycle_with_nothing_changed_writes_nothing(world: World) -> None:
    # Given a cycle that wrote the team shares
    two_teams(world)
    world.cycle()
    before = world.shares()
    # When the next cycle runs at the same instant (no priority changed, no usage moved)
    report = world.cycle()
    # Then the computed weights equal those in place: no UpdateSchedulingPolicy at all
    assert len(world.updates) == 1
    assert report.writes == 0
    assert world.shares() == before


def test_usage_moves_the_weights_in_a_cycle_without_any_priority_change(world: World) -> None:
    # Given a cycle that wrote the team shares
    two_teams(world)
    world.cycle()
    # When ten minutes later a cycle runs with no pending job (the housekeeping writes the team shares)
    world.now += timedelta(minutes=10)
    report = world.cycle()
    # Then vision's small share, which has held its GPUs for less time, moved towards the team's total
    g1, g0 = _held(8, 2 + 1 / 6), _held(2, 1 + 1 / 6)
    assert world.shares()["osprey-vision-g0"] == round(2.0 * (g1 + g0) / g0 * _order(None), 4)
    assert report.writes == 1
    assert len(world.updates) == 2


def test_a_share_whose_last_job_ended_is_pruned(world: World) -> None:
    # Given a cycle that wrote both teams' shares
    jobs = two_teams(world)
    world.cycle()
    # When nlp's two jobs end and the next cycle runs
    world.finish(jobs["n64"])
    world.finish(jobs["n64q"])
    report = world.cycle()
    # Then nlp's share left the policy and the ledger; vision's shares and the teams' own entries stay
    assert report.pruned == 1
    assert "osprey-nlp-g2" not in world.shares()
    assert {"vision", "analytics", "osprey-vision-g1", "osprey-vision-g0"} <= set(world.shares())
    assert {entry.share for entry in world.ledger.entries()} == {"osprey-vision-g1", "osprey-vision-g0"}
    # And it took one UpdateSchedulingPolicy (pruning and the vision weights together)
    assert len(world.updates) == 2


def test_a_throttled_update_is_retried_with_backoff(world: World) -> None:
    # Given Batch throttling the first UpdateSchedulingPolicy
    throttled: list[str] = []

    def throttle(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if throttled:
            return None  # moto answers the retry
        throttled.append("UpdateSchedulingPolicy")
        error = {"Error": {"Code": "TooManyRequestsException", "Message": "Too Many Requests"}}
        return AWSResponse("https://batch", 429, HTTPHeaders(), None), {
            **error,
            "ResponseMetadata": {"HTTPStatusCode": 429},
        }

    world.batch.meta.events.register_first("before-call.batch.UpdateSchedulingPolicy", throttle)
    jobs = two_teams(world)
    # When the apply step runs
    report = world.cycle()
    # Then the update was retried after a wait and the weights are in place; the jobs are applied
    assert throttled == ["UpdateSchedulingPolicy"]
    assert len(world.waits) == 1
    assert "osprey-vision-g1" in world.shares()
    assert report.by_job()[jobs["v8q"].key].outcome is Outcome.APPLIED
    assert report.writes == 2


def test_a_share_entry_osprey_did_not_create_is_refused_with_the_reason_explain_shows(world: World) -> None:
    # Given a job submitted with osprey-ml-g0, an entry that was in the policy before Osprey
    job = world.job("ml", "osprey-ml-g0", 2, applied=40, derived=80)
    # When the apply step runs
    report = world.cycle()
    # Then the entry keeps its weight, and the job is skipped with the reason recorded where explain reads it
    assert world.shares()["osprey-ml-g0"] == 3.0
    assert report.by_job()[job.key].outcome is Outcome.SKIPPED
    record = world.registry.get(job.key)
    assert record is not None
    assert record.apply_failure is not None
    assert "Osprey did not create" in record.apply_failure.reason
    assert world.ledger.entries() == []
