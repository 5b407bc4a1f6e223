""" "Already in place" is success on every backend (issue 28 item 5): when the value read back is the one
wanted, the job is reported applied at that priority (what the apply step records as ``applied_priority``),
never skipped or failed, whoever put the value there: a write whose answer was lost, an earlier cycle whose
outcome was not recorded, a concurrent writer. The EKS applier's share is in tests/control/backends/eks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.stub import Stubber
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from osprey_control.backends import DERIVED_PRIORITY_TAG, ApplyResult, Outcome, PriorityChange
from osprey_control.backends.batch import BatchShareApplier, weight_factor
from osprey_control.backends.sagemaker import TrainingJobTagApplier
from osprey_control.backends.sagemaker_queue import ServiceJobApplier
from osprey_control.backends.slurm import (
    SlurmApplier,
    SlurmClient,
    SlurmCredentials,
    SlurmPriorityRange,
    SlurmUnavailableError,
    marker,
)
from osprey_control.contract import batch_scheduling_priority, parse_block
from osprey_control.registry import Backend
from tests.control.backends.appliers.test_batch_shares import Fleet
from tests.control.backends.appliers.test_sagemaker_appliers import ENABLED, queued, service_job, training_job
from tests.control.metrics.helpers import record

PRIORITIES = st.integers(min_value=0, max_value=100)
# What the registry believes is applied: nothing yet, or any other priority (a stale value).
BELIEVED = st.none() | PRIORITIES


def _lost_answer(operation: str) -> Any:
    """An ``after-call`` handler: the call was carried out, then its answer is lost on the way back."""

    def lose(**_: Any) -> None:
        raise ReadTimeoutError(endpoint_url=f"https://{operation}.amazonaws.com")

    return lose


def _applied_at(result: ApplyResult, priority: int) -> None:
    assert (result.outcome, result.priority) == (Outcome.APPLIED, priority), result.reason
    assert result.reason.startswith("already set")


# -- SageMaker through a Batch queue: UpdateServiceJob schedulingPriority -----------------------------------


@settings(max_examples=30, deadline=None)
@given(priority=PRIORITIES, believed=BELIEVED, status=st.sampled_from(["RUNNABLE", "RUNNING", "SUCCEEDED"]))
def test_a_service_job_already_at_its_scheduling_priority_is_applied_without_a_write(
    priority: int, believed: int | None, status: str
) -> None:
    if believed == priority:
        believed = None
    client = boto3.client("batch", region_name="us-east-1")
    # Given a service job (queued, running, or even finished) already at the value of ``priority``
    target = batch_scheduling_priority(priority)
    with Stubber(client) as stubber:
        stubber.add_response(
            "describe_service_job",
            service_job("a", priority=target, tags=ENABLED, status=status),
            {"jobId": "a"},
        )
        # When ``priority`` is applied while the registry believes ``believed``
        report = ServiceJobApplier(client).apply([PriorityChange(queued("a", believed), priority)])
        stubber.assert_no_pending_responses()  # no UpdateServiceJob
    # Then it is applied at ``priority``
    [result] = report.results
    _applied_at(result, priority)
    assert (result.native_value, report.writes) == (str(target), 0)


def test_an_update_service_job_whose_answer_was_lost_is_applied(batch: Any) -> None:
    client, stubber = batch
    # Given a service job at 4999 whose UpdateServiceJob lands but answers a 5xx after botocore's retries
    stubber.add_response(
        "describe_service_job", service_job("a", priority=4999, tags=ENABLED), {"jobId": "a"}
    )
    stubber.add_client_error(
        "update_service_job", "ServerException", "timed out", 500,
        expected_params={"jobId": "a", "schedulingPriority": 5999},
    )  # fmt: skip
    # ... and a new read shows the value it wrote
    stubber.add_response(
        "describe_service_job", service_job("a", priority=5999, tags=ENABLED), {"jobId": "a"}
    )
    # When 60 is applied
    report = ServiceJobApplier(client).apply([PriorityChange(queued("a", 50), 60)])
    # Then the job is applied at 60, not failed
    [result] = report.results
    _applied_at(result, 60)
    assert "the write failed" in result.reason
    assert result.native_value == "5999"


def test_a_failed_update_service_job_that_did_not_land_still_fails(batch: Any) -> None:
    client, stubber = batch
    stubber.add_response(
        "describe_service_job", service_job("a", priority=4999, tags=ENABLED), {"jobId": "a"}
    )
    stubber.add_client_error("update_service_job", "ServerException", "timed out", 500)
    stubber.add_response(
        "describe_service_job", service_job("a", priority=4999, tags=ENABLED), {"jobId": "a"}
    )
    [result] = ServiceJobApplier(client).apply([PriorityChange(queued("a", 50), 60)]).results
    assert (result.outcome, result.transient) == (Outcome.FAILED, True)
    assert "UpdateServiceJob a failed" in result.reason


# -- SageMaker training jobs: the osprey:derived-priority tag ---------------------------------------------


def test_add_tags_whose_answer_was_lost_is_applied() -> None:
    with mock_aws():
        sagemaker = boto3.client("sagemaker", region_name="us-east-1")
        # Given an opted-in training job tagged 40, whose next AddTags lands but whose answer is lost
        arn = training_job(sagemaker, "train", {**ENABLED, DERIVED_PRIORITY_TAG: "40"})
        sagemaker.meta.events.register("after-call.sagemaker.AddTags", _lost_answer("sagemaker"))
        change = PriorityChange(record(Backend.SAGEMAKER, "train", [], arn=arn, applied_priority=40), 58)
        # When 58 is applied
        report = TrainingJobTagApplier(sagemaker).apply([change])
        # Then the tag holds 58 and the job is applied at 58
        tags = {tag["Key"]: tag["Value"] for tag in sagemaker.list_tags(ResourceArn=arn)["Tags"]}
        assert tags[DERIVED_PRIORITY_TAG] == "58"
        [result] = report.results
        _applied_at(result, 58)


@settings(max_examples=20, deadline=None)
@given(priority=PRIORITIES, believed=BELIEVED)
def test_a_training_job_already_tagged_is_applied_without_a_write(
    priority: int, believed: int | None
) -> None:
    if believed == priority:
        believed = None
    with mock_aws():
        sagemaker = boto3.client("sagemaker", region_name="us-east-1")
        arn = training_job(sagemaker, "train", {**ENABLED, DERIVED_PRIORITY_TAG: str(priority)})
        change = PriorityChange(
            record(Backend.SAGEMAKER, "train", [], arn=arn, applied_priority=believed), priority
        )
        report = TrainingJobTagApplier(sagemaker).apply([change])
    [result] = report.results
    _applied_at(result, priority)
    assert report.writes == 0


# -- AWS Batch fair share: weightFactor ---------------------------------------------------------------------


def test_an_update_scheduling_policy_whose_answer_was_lost_is_applied() -> None:
    with mock_aws(config={"batch": {"use_docker": False}}):
        fleet = Fleet(boto3.client("batch", region_name="us-east-1"))
        job = fleet.job("j", share="osprey-job-j", applied=50)
        # Given every UpdateSchedulingPolicy lands but its answer is lost (so each retry lands too)
        fleet.client.meta.events.register("after-call.batch.UpdateSchedulingPolicy", _lost_answer("batch"))
        # When 60 is applied
        report = BatchShareApplier(fleet.client, sleep=lambda _: None).apply([PriorityChange(job, 60)])
        # Then the policy holds the job's weight, and the job is applied at 60 (not failed, not retried)
        assert fleet.shares()["osprey-job-j"] == weight_factor(60)
        [result] = report.results
        assert (result.outcome, result.priority) == (Outcome.APPLIED, 60)
        assert result.native_value == f"osprey-job-j={weight_factor(60)}"


@settings(max_examples=10, deadline=None)
@given(priority=PRIORITIES, believed=BELIEVED)
def test_a_share_already_at_its_weight_is_applied_without_an_update(
    priority: int, believed: int | None
) -> None:
    if believed == priority:
        believed = None
    with mock_aws(config={"batch": {"use_docker": False}}):
        fleet = Fleet(boto3.client("batch", region_name="us-east-1"))
        job = fleet.job("j", share="osprey-job-j", applied=believed)
        # Given Osprey's share of the job already at the weight of ``priority`` (written by an earlier cycle)
        # (the same applier: it knows the entry is Osprey's, as the share ledger tells a cold one)
        applier = BatchShareApplier(fleet.client)
        applier.apply([PriorityChange(job, priority)])
        updates = len(fleet.updates)
        # When the same priority comes again (that cycle's outcome was not recorded)
        report = applier.apply([PriorityChange(job, priority)])
    # Then nothing is written and the job is applied at ``priority``
    assert len(fleet.updates) == updates
    [result] = report.results
    _applied_at(result, priority)


# -- Slurm: the job's priority ----------------------------------------------------------------------------

BLOCK = parse_block({"priority_derivation_profile": "training-policy"})


class MemorySlurm(SlurmClient):
    """slurmrestd's job read and update over jobs in memory; ``lose`` updates land, then answer nothing."""

    def __init__(self, jobs: Mapping[int, dict[str, Any]], lose: int = 0) -> None:
        super().__init__(
            "http://127.0.0.1:9", lambda: SlurmCredentials("osprey", "token"), allow_insecure_http=True
        )
        self.stored = {job_id: dict(job) for job_id, job in jobs.items()}
        self.lose = lose
        self.updates: list[tuple[int, dict[str, Any]]] = []

    def job(self, job_id: int | str) -> dict[str, Any] | None:
        found = self.stored.get(int(job_id))
        return None if found is None else dict(found)

    def update_job(self, job_id: int | str, fields: Mapping[str, Any]) -> None:
        self.updates.append((int(job_id), dict(fields)))
        self.stored[int(job_id)].update(fields)
        if self.lose > 0:
            self.lose -= 1
            raise SlurmUnavailableError(f"update job {job_id}: no answer from slurmrestd (connection reset)")


def _slurm_job(priority: int, state: str = "PENDING") -> dict[str, Any]:
    return {"job_id": 7, "job_state": state, "comment": marker(BLOCK), "priority": priority}


def _slurm_change(priority: int, believed: int | None) -> PriorityChange:
    return PriorityChange(
        record(Backend.SLURM, "hpc/7", [], cluster="hpc", applied_priority=believed), priority
    )


def test_a_slurm_update_whose_answer_was_lost_is_applied() -> None:
    # Given a queued job at 4001 (Osprey 40) whose next update lands but whose answer is lost
    slurm = MemorySlurm({7: _slurm_job(4001)}, lose=1)
    # When 50 is applied
    report = SlurmApplier(lambda cluster: slurm).apply([_slurm_change(50, 40)])
    # Then Slurm holds 5001 after one update, and the job is applied at 50
    assert slurm.stored[7]["priority"] == 5001
    assert slurm.updates == [(7, {"priority": 5001})]
    [result] = report.results
    _applied_at(result, 50)
    assert "the update failed" in result.reason


@pytest.mark.parametrize("state", ["PENDING", "RUNNING", "COMPLETED"])
@given(priority=PRIORITIES, believed=BELIEVED)
@settings(max_examples=30, deadline=None)
def test_a_slurm_job_already_at_its_priority_is_applied_without_an_update(
    state: str, priority: int, believed: int | None
) -> None:
    if believed == priority:
        believed = None
    # Given a marked job (queued, running or ended) whose priority is already the mapped value
    slurm = MemorySlurm({7: _slurm_job(SlurmPriorityRange().map(priority), state)})
    # When ``priority`` is applied
    report = SlurmApplier(lambda cluster: slurm).apply([_slurm_change(priority, believed)])
    # Then nothing is written and the job is applied at ``priority``
    assert slurm.updates == []
    [result] = report.results
    _applied_at(result, priority)
    assert report.writes == 0
