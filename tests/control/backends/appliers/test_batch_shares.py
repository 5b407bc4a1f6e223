"""Batch fair-share weights against moto: one UpdateSchedulingPolicy per policy, other shares untouched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from osprey_control.backends import Outcome, PriorityChange
from osprey_control.backends.batch import MAX_WEIGHT, MIN_WEIGHT, BatchShareApplier, weight_factor
from osprey_control.backends.batch.distribution import UPDATE_ATTEMPTS
from osprey_control.registry.model import Backend, JobRecord
from tests.control.metrics.helpers import instance, record

ENABLED = {"osprey:enabled": "true", "osprey:policy": "training-policy"}


class Fleet:
    """A fair-share queue in moto with a non-Osprey share and a wildcard entry already in its policy."""

    def __init__(self, client: Any) -> None:
        self.client = client
        iam = boto3.client("iam", region_name="us-east-1")
        role = iam.create_role(RoleName="batch", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        environment = client.create_compute_environment(
            computeEnvironmentName="gpu", type="UNMANAGED", state="ENABLED", serviceRole=role
        )["computeEnvironmentArn"]
        self.policy = client.create_scheduling_policy(
            name="fair",
            fairsharePolicy={
                "shareDecaySeconds": 3600,
                "computeReservation": 10,
                "shareDistribution": [
                    {"shareIdentifier": "analytics", "weightFactor": 0.5},
                    {"shareIdentifier": "legacy*", "weightFactor": 2.0},
                ],
            },
        )["arn"]
        self.queue = client.create_job_queue(
            jobQueueName="ml",
            state="ENABLED",
            priority=1,
            schedulingPolicyArn=self.policy,
            computeEnvironmentOrder=[{"order": 1, "computeEnvironment": environment}],
        )["jobQueueArn"]
        client.register_job_definition(
            jobDefinitionName="train",
            type="container",
            containerProperties={"image": "train:1", "vcpus": 1, "memory": 512},
        )
        self.updates: list[dict[str, Any]] = []
        client.meta.events.register(
            "provide-client-params.batch.UpdateSchedulingPolicy",
            lambda params, **_: self.updates.append(params),
        )

    def job(self, name: str, *, share: str, applied: int | None, tags: dict[str, str] = ENABLED) -> JobRecord:
        job_id = self.client.submit_job(
            jobName=name, jobQueue=self.queue, jobDefinition="train", shareIdentifier=share, tags=tags
        )["jobId"]
        return record(
            Backend.BATCH,
            job_id,
            [instance("i-1")],
            job_queue=self.queue,
            share_identifier=share,
            applied_priority=applied,
        )

    def shares(self) -> dict[str, float]:
        [policy] = self.client.describe_scheduling_policies(arns=[self.policy])["schedulingPolicies"]
        return {
            entry["shareIdentifier"]: entry["weightFactor"]
            for entry in policy["fairsharePolicy"]["shareDistribution"]
        }


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with mock_aws(config={"batch": {"use_docker": False}}):
        yield Fleet(boto3.client("batch", region_name="us-east-1"))


def test_one_policy_update_per_cycle_sets_each_jobs_weight_and_keeps_other_shares(fleet: Fleet) -> None:
    # Given three enabled jobs with their own shares, one job that did not opt in, and one unchanged job
    high = fleet.job("high", share="osprey-job-high", applied=50)
    low = fleet.job("low", share="osprey-job-low", applied=50)
    top = fleet.job("top", share="osprey-job-top", applied=90)
    foreign = fleet.job("foreign", share="osprey-job-foreign", applied=50, tags={"team": "x"})
    same = fleet.job("same", share="osprey-job-same", applied=30)
    changes = [
        PriorityChange(high, 60),
        PriorityChange(low, 0),
        PriorityChange(top, 100),
        PriorityChange(foreign, 80),
        PriorityChange(same, 30),
    ]

    # When applied
    report = BatchShareApplier(fleet.client).apply(changes)

    # Then the policy was updated exactly once with the mapped weights, the existing shares kept as they were
    assert len(fleet.updates) == 1
    assert report.writes == 1
    assert fleet.shares() == {
        "analytics": 0.5,
        "legacy*": 2.0,
        "osprey-job-high": weight_factor(60),
        "osprey-job-low": MAX_WEIGHT,
        "osprey-job-top": MIN_WEIGHT,
    }
    [policy] = fleet.client.describe_scheduling_policies(arns=[fleet.policy])["schedulingPolicies"]
    assert policy["fairsharePolicy"]["shareDecaySeconds"] == 3600
    outcomes = {result.job: result.outcome for result in report.results}
    assert outcomes[foreign.key] is Outcome.SKIPPED
    assert outcomes[same.key] is Outcome.APPLIED  # unchanged: the registry already records it in force
    assert [outcomes[job.key] for job in (high, low, top)] == [Outcome.APPLIED] * 3


def test_jobs_whose_share_cannot_be_weighted_fail_alone(fleet: Fleet) -> None:
    # Given a job inside the policy's wildcard, two jobs sharing one identifier, and a well-formed job
    wild = fleet.job("wild", share="legacy-1", applied=50)
    twin_a = fleet.job("twin-a", share="osprey-job-shared", applied=50)
    twin_b = fleet.job("twin-b", share="osprey-job-shared", applied=50)
    good = fleet.job("good", share="osprey-job-good", applied=50)

    report = BatchShareApplier(fleet.client).apply(
        [PriorityChange(job, 70) for job in (wild, twin_a, twin_b, good)]
    )

    # Then each problem job fails with a reason that says what to change, and the good job still gets its weight
    by_job = report.by_job()
    assert "wildcard entry legacy*" in by_job[wild.key].reason
    assert "give each job its own" in by_job[twin_a.key].reason
    assert by_job[twin_b.key].outcome is Outcome.FAILED
    assert by_job[good.key].outcome is Outcome.APPLIED
    assert set(fleet.shares()) == {"analytics", "legacy*", "osprey-job-good"}
    assert len(fleet.updates) == 1


def test_weights_already_in_place_are_not_written_again(fleet: Fleet) -> None:
    job = fleet.job("j", share="osprey-job-j", applied=50)
    applier = BatchShareApplier(fleet.client)  # no ledger: the entries it created are known to it alone
    applier.apply([PriorityChange(job, 60)])

    # When the registry lost the applied priority and the same change comes again
    report = applier.apply([PriorityChange(job, 60)])

    # Then no second update is made
    assert len(fleet.updates) == 1
    assert report.results[0].reason == "already set"


def test_a_queue_without_a_scheduling_policy_is_explained(fleet: Fleet) -> None:
    environment = fleet.client.describe_compute_environments()["computeEnvironments"][0][
        "computeEnvironmentArn"
    ]
    plain = fleet.client.create_job_queue(
        jobQueueName="fifo",
        state="ENABLED",
        priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": environment}],
    )["jobQueueArn"]
    job_id = fleet.client.submit_job(jobName="f", jobQueue=plain, jobDefinition="train", tags=ENABLED)[
        "jobId"
    ]
    job = record(
        Backend.BATCH, job_id, [], job_queue=plain, share_identifier="osprey-job-f", applied_priority=50
    )

    report = BatchShareApplier(fleet.client).apply([PriorityChange(job, 60)])

    assert report.results[0].outcome is Outcome.FAILED
    assert "no fair-share scheduling policy" in report.results[0].reason
    assert fleet.updates == []


@given(st.integers(0, 99))
def test_weight_factor_is_strictly_decreasing_within_the_batch_limits(priority: int) -> None:
    assert weight_factor(priority) > weight_factor(priority + 1)
    assert 0.0001 <= weight_factor(priority + 1) <= weight_factor(priority) <= 999.9999
    assert weight_factor(100) == 1.0
    assert weight_factor(0) == 100.0


def test_a_failing_policy_update_fails_only_the_jobs_of_that_policy() -> None:
    # Given two queues with their own scheduling policies (real request shapes checked by the Stubber)
    client = boto3.client("batch", region_name="us-east-1")
    arn = "arn:aws:batch:us-east-1:123456789012:{}"
    jobs = [
        record(
            Backend.BATCH,
            f"id-{name}",
            [],
            job_queue=arn.format(f"job-queue/{name}"),
            share_identifier=f"osprey-job-{name}",
            applied_priority=60,
        )
        for name in ("a", "b")
    ]
    described = [
        {
            "jobId": f"id-{name}",
            "jobName": name,
            "jobQueue": "q",
            "status": "RUNNABLE",
            "startedAt": 0,
            "jobDefinition": "d",
            "tags": ENABLED,
        }
        for name in ("a", "b")
    ]
    queues: list[dict[str, Any]] = [
        {
            "jobQueueName": name,
            "jobQueueArn": arn.format(f"job-queue/{name}"),
            "state": "ENABLED",
            "priority": 1,
            "computeEnvironmentOrder": [],
            "schedulingPolicyArn": arn.format(f"scheduling-policy/{name}"),
        }
        for name in ("a", "b")
    ]
    with Stubber(client) as stubber:
        stubber.add_response("describe_jobs", {"jobs": described}, {"jobs": ["id-a", "id-b"]})
        stubber.add_response(
            "describe_job_queues", {"jobQueues": queues}, {"jobQueues": [q["jobQueueArn"] for q in queues]}
        )
        for name in ("a", "b"):
            policy_arn = arn.format(f"scheduling-policy/{name}")
            stubber.add_response(
                "describe_scheduling_policies",
                {
                    "schedulingPolicies": [
                        {"name": name, "arn": policy_arn, "fairsharePolicy": {"shareDistribution": []}}
                    ]
                },
                {"arns": [policy_arn]},
            )
            expected = {
                "arn": policy_arn,
                "fairsharePolicy": {
                    "shareDistribution": [{"shareIdentifier": f"osprey-job-{name}", "weightFactor": 10.0}]
                },
            }
            if name == "a":  # a 5xx on every try (the applier retries transient errors with backoff)
                for _ in range(UPDATE_ATTEMPTS):
                    stubber.add_client_error(
                        "update_scheduling_policy",
                        "ServerException",
                        "internal",
                        500,
                        expected_params=expected,
                    )
                # ... then the policy is read again: no update landed, so the job fails
                stubber.add_response(
                    "describe_scheduling_policies",
                    {
                        "schedulingPolicies": [
                            {"name": name, "arn": policy_arn, "fairsharePolicy": {"shareDistribution": []}}
                        ]
                    },
                    {"arns": [policy_arn]},
                )
            else:
                stubber.add_response("update_scheduling_policy", {}, expected)

        # When policy a's update keeps failing with a 5xx
        waits: list[float] = []
        report = BatchShareApplier(client, sleep=waits.append).apply(
            [PriorityChange(job, 50) for job in jobs]
        )
        stubber.assert_no_pending_responses()

    # Then job a fails as transient after its retries, with growing waits, and job b is applied
    by_job = report.by_job()
    assert by_job[jobs[0].key].outcome is Outcome.FAILED
    assert by_job[jobs[0].key].transient
    assert by_job[jobs[1].key].outcome is Outcome.APPLIED
    assert report.writes == UPDATE_ATTEMPTS + 1
    assert len(waits) == UPDATE_ATTEMPTS - 1
    assert waits == sorted(waits)


def test_a_share_entry_osprey_did_not_create_is_never_changed(fleet: Fleet) -> None:
    # Given a job submitted with the team's own share "analytics", whose entry (weightFactor 0.5) was in the
    # policy before Osprey, and a job with a share of its own
    team_job = fleet.job("team", share="analytics", applied=50)
    own = fleet.job("own", share="osprey-job-own", applied=50)

    # When both get new priorities, over two cycles
    applier = BatchShareApplier(fleet.client)
    report = applier.apply([PriorityChange(team_job, 90), PriorityChange(own, 90)])
    later = applier.apply([PriorityChange(team_job, 10), PriorityChange(own, 10)])

    # Then the team's entry keeps its weight, the team's job is skipped with the reason, and the job's own entry
    # (which Osprey created) follows its priority
    assert fleet.shares()["analytics"] == 0.5
    assert fleet.shares()["osprey-job-own"] == weight_factor(10)
    for result in (report.by_job()[team_job.key], later.by_job()[team_job.key]):
        assert result.outcome is Outcome.SKIPPED
        assert "Osprey did not create" in result.reason
    assert later.by_job()[own.key].outcome is Outcome.APPLIED
    # And every update sent left the team's entry as it was
    for update in fleet.updates:
        entries = {
            e["shareIdentifier"]: e.get("weightFactor")
            for e in update["fairsharePolicy"]["shareDistribution"]
        }
        assert entries["analytics"] == 0.5


def test_a_team_share_job_without_the_registry_listing_fails_with_the_reason(fleet: Fleet) -> None:
    # Given two jobs of team vision's Osprey share for 8-GPU jobs, and an applier given no listing of the
    # registry's active jobs (the team fold needs every job of the share, not only the changed ones)
    first = fleet.job("v1", share="osprey-vision-g1", applied=50)
    second = fleet.job("v2", share="osprey-vision-g1", applied=50)
    # When their priorities change
    report = BatchShareApplier(fleet.client).apply([PriorityChange(first, 80), PriorityChange(second, 20)])
    # Then neither writes its own weight into the team's share: both fail, saying why
    assert fleet.updates == []
    for job in (first, second):
        assert report.by_job()[job.key].outcome is Outcome.FAILED
        assert "no listing of the registry's active jobs" in report.by_job()[job.key].reason
