"""Given a queued SageMaker job (an AWS Batch service job) whose derived priority is pending, when the apply
step's UpdateServiceJob fails, then a transient failure is retried every cycle up to
MAX_TRANSIENT_APPLY_ATTEMPTS, a permanent one is parked until the derived priority changes, and a success
records the applied priority (moto DynamoDB for the registry; botocore Stubber for Batch, which moto lacks)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.stub import Stubber

from osprey_control.backends.sagemaker_queue import ServiceJobApplier
from osprey_control.contract import batch_scheduling_priority, parse_block
from osprey_control.policy_store import PolicySource
from osprey_control.registry import MAX_TRANSIENT_APPLY_ATTEMPTS, Backend, JobKey, JobRecord, JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.derive import derive_within
from tests.control.steps.cycle.conftest import NOW

KEY = JobKey(Backend.SAGEMAKER_QUEUED, "9f2c-service-job")
ENABLED = {"osprey:enabled": "true", "osprey:policy": "training-policy"}


@pytest.fixture
def queued(aws: dict[str, Any]) -> JobRegistry:
    """A running queued job without metrics: every cycle derives the same 50 (no-data keeps prev)."""
    registry: JobRegistry = aws["registry"]
    registry.apply_observation(
        JobObservation(
            backend=KEY.backend,
            native_id=KEY.native_id,
            name="llama-train",
            block=parse_block({"priority_derivation_profile": "training-policy"}),
            status=JobStatus.RUNNING,
            event_time=NOW - timedelta(minutes=5),
        )
    )
    return registry


def describe(stubber: Stubber, priority: int = 0) -> None:
    stubber.add_response(
        "describe_service_job",
        {
            "jobId": KEY.native_id,
            "jobName": "llama-train",
            "jobQueue": "arn:aws:batch:us-east-1:123456789012:job-queue/ml",
            "serviceJobType": "SAGEMAKER_TRAINING",
            "startedAt": 0,
            "status": "RUNNABLE",
            "schedulingPriority": priority,
            "tags": ENABLED,
        },
        {"jobId": KEY.native_id},
    )


def cycle(aws: dict[str, Any], client: Any, minute: int) -> tuple[dict[str, Any], JobRecord]:
    now = NOW + timedelta(minutes=minute)
    shard = derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=now
    ).report
    apply_cycle([shard.to_dict()], aws["registry"], [ServiceJobApplier(client)], now=now)
    record = aws["registry"].get(KEY)
    assert record is not None
    return shard.to_dict(), record


def test_a_throttled_update_is_retried_each_cycle_up_to_the_limit(
    aws: dict[str, Any], queued: JobRegistry, batch: tuple[Any, Stubber]
) -> None:
    client, stubber = batch
    # Given UpdateServiceJob throttled in every cycle
    for _ in range(MAX_TRANSIENT_APPLY_ATTEMPTS):
        describe(stubber)
        stubber.add_client_error("update_service_job", "TooManyRequestsException", "Slow down", 429)
    # When MAX_TRANSIENT_APPLY_ATTEMPTS cycles run
    attempts = []
    for minute in range(MAX_TRANSIENT_APPLY_ATTEMPTS):
        shard, record = cycle(aws, client, minute)
        assert shard["pending"] == 1
        assert record.apply_failure is not None
        attempts.append(record.apply_failure.attempts)
    # Then each cycle retried it and counted the attempt; the derived priority was never lost
    assert attempts == list(range(1, MAX_TRANSIENT_APPLY_ATTEMPTS + 1))
    assert (record.derived_priority, record.applied_priority) == (50, None)
    assert record.apply_failure is not None
    assert "TooManyRequestsException" in record.apply_failure.reason
    # ... and after the limit the shard no longer hands it to the apply step (no Batch call: the Stubber
    # has no response left and would raise)
    shard, record = cycle(aws, client, MAX_TRANSIENT_APPLY_ATTEMPTS)
    assert shard["pending"] == 0
    assert not record.apply_pending()


def test_a_success_after_a_transient_failure_records_the_applied_priority(
    aws: dict[str, Any], queued: JobRegistry, batch: tuple[Any, Stubber]
) -> None:
    client, stubber = batch
    describe(stubber)
    stubber.add_client_error("update_service_job", "ServerException", "Internal", 500)
    describe(stubber)  # read back after the 5xx (it may have landed): it did not, so the failure stands
    describe(stubber)
    stubber.add_response(
        "update_service_job",
        {"jobId": KEY.native_id, "jobName": "llama-train", "jobArn": "arn"},
        {"jobId": KEY.native_id, "schedulingPriority": 5000},
    )
    _, failed = cycle(aws, client, 0)
    _, applied = cycle(aws, client, 1)
    assert failed.apply_failure is not None
    assert not failed.apply_failure.permanent
    assert (applied.applied_priority, applied.applied_at, applied.apply_failure) == (
        50,
        NOW + timedelta(minutes=1),
        None,
    )
    assert applied.version > failed.version  # every registry write is conditional and counted


def test_a_permanent_failure_is_not_retried_until_the_derived_priority_changes(
    aws: dict[str, Any], queued: JobRegistry, batch: tuple[Any, Stubber]
) -> None:
    client, stubber = batch
    # Given a request Batch refuses (not retryable)
    describe(stubber)
    stubber.add_client_error("update_service_job", "ClientException", "job is not updatable", 400)
    describe(
        stubber
    )  # read back after the refusal (a retry of a write that landed is refused too): not there
    _, record = cycle(aws, client, 0)
    assert record.apply_failure is not None
    assert (record.apply_failure.permanent, record.apply_failure.priority) == (True, 50)
    assert "not retried until the derived priority changes" in record.apply_failure.reason
    # When the next cycle derives the same priority, then nothing is tried (the Stubber has no response left)
    shard, record = cycle(aws, client, 1)
    assert shard["pending"] == 0
    # When a later derivation moves the priority, then the new one is applied and the old failure is gone
    later = NOW + timedelta(minutes=2)
    queued.record_decision(KEY, {"priority": 57}, 57, record.version, later)
    describe(stubber, priority=batch_scheduling_priority(50))
    stubber.add_response(
        "update_service_job",
        {"jobId": KEY.native_id, "jobName": "llama-train", "jobArn": "arn"},
        {"jobId": KEY.native_id, "schedulingPriority": batch_scheduling_priority(57)},
    )
    assert queued.pending_keys() == [KEY]  # the decision's write put it in the apply-pending index
    apply_cycle([{"shard": 0}], queued, [ServiceJobApplier(client)], now=later)
    final = queued.get(KEY)
    assert final is not None
    assert (final.derived_priority, final.applied_priority, final.apply_failure) == (57, 57, None)
