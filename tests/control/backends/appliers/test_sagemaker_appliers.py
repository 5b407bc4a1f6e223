"""SageMaker appliers: UpdateServiceJob for queued jobs (Stubber, moto lacks it), tags for direct jobs (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.backends import DERIVED_PRIORITY_TAG, Outcome, PriorityChange, apply_all
from osprey_control.backends.batch import BatchShareApplier
from osprey_control.backends.sagemaker import TrainingJobTagApplier
from osprey_control.backends.sagemaker_queue import ServiceJobApplier
from osprey_control.registry.model import Backend
from tests.control.metrics.helpers import host, record

ENABLED = {"osprey:enabled": "true", "osprey:policy": "training-policy"}


def service_job(
    job_id: str, *, priority: int, tags: dict[str, str], status: str = "RUNNABLE"
) -> dict[str, Any]:
    return {
        "jobId": job_id,
        "jobName": f"name-{job_id}",
        "jobQueue": "arn:aws:batch:us-east-1:123456789012:job-queue/ml",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "startedAt": 0,
        "status": status,
        "schedulingPriority": priority,
        "tags": tags,
    }


def queued(job_id: str, applied: int | None) -> Any:
    return record(
        Backend.SAGEMAKER_QUEUED, job_id, [host("algo-1")], name=f"train-{job_id}", applied_priority=applied
    )


def test_queued_jobs_get_update_service_job_on_the_9999_scale(batch: Any) -> None:
    client, stubber = batch
    # Given an enabled queued job moving 50 -> 60, one not opted in, and one unchanged
    changes = [
        PriorityChange(queued("a", 50), 60),
        PriorityChange(queued("b", 50), 70),
        PriorityChange(queued("c", 40), 40),
    ]
    stubber.add_response(
        "describe_service_job", service_job("a", priority=4999, tags=ENABLED), {"jobId": "a"}
    )
    stubber.add_response(
        "update_service_job",
        {"jobId": "a", "jobName": "name-a", "jobArn": "arn"},
        {"jobId": "a", "schedulingPriority": 5999},
    )
    stubber.add_response("describe_service_job", service_job("b", priority=4999, tags={}), {"jobId": "b"})

    # When applied
    report = ServiceJobApplier(client).apply(changes)

    # Then only the enabled, changed job is written (60 -> 5999), the one not opted in is skipped with a
    # reason, and the unchanged one is applied without a call (the registry already records it in force)
    outcomes = {key.native_id: (result.outcome, result.reason) for key, result in report.by_job().items()}
    assert outcomes["a"] == (Outcome.APPLIED, "written")
    assert outcomes["b"][0] is Outcome.SKIPPED
    assert "osprey:enabled" in outcomes["b"][1]
    assert outcomes["c"] == (Outcome.APPLIED, "unchanged")
    assert report.writes == 1
    assert report.by_job()[changes[0].record.key].native_value == "5999"


def test_a_throttled_update_fails_that_job_only_and_is_transient(batch: Any) -> None:
    client, stubber = batch
    changes = [PriorityChange(queued("a", 50), 60), PriorityChange(queued("b", 50), 0)]
    stubber.add_response(
        "describe_service_job", service_job("a", priority=4999, tags=ENABLED), {"jobId": "a"}
    )
    # (throttled: the request was refused unread, so the value is not read back; the next cycle reads it)
    stubber.add_client_error("update_service_job", "TooManyRequestsException", "Slow down", 429)
    stubber.add_response(
        "describe_service_job", service_job("b", priority=4999, tags=ENABLED), {"jobId": "b"}
    )
    stubber.add_response("update_service_job", {}, {"jobId": "b", "schedulingPriority": 0})

    report = ServiceJobApplier(client).apply(changes)

    first, second = (report.by_job()[change.record.key] for change in changes)
    assert first.outcome is Outcome.FAILED
    assert first.transient
    assert "retried next cycle" in first.reason
    assert second.outcome is Outcome.APPLIED


def test_an_already_set_or_finished_service_job_is_not_written(batch: Any) -> None:
    client, stubber = batch
    changes = [PriorityChange(queued("a", 50), 60), PriorityChange(queued("b", 50), 60)]
    stubber.add_response(
        "describe_service_job", service_job("a", priority=5999, tags=ENABLED), {"jobId": "a"}
    )
    stubber.add_response(
        "describe_service_job", service_job("b", priority=1, tags=ENABLED, status="SUCCEEDED"), {"jobId": "b"}
    )

    report = ServiceJobApplier(client).apply(changes)

    assert [result.reason for result in report.results] == ["already set", "service job is SUCCEEDED"]
    assert report.writes == 0


@pytest.fixture
def sagemaker() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sagemaker", region_name="us-east-1")


def training_job(client: Any, name: str, tags: dict[str, str]) -> str:
    response = client.create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1",
            "TrainingInputMode": "File",
        },
        RoleArn="arn:aws:iam::123456789012:role/sm",
        OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        Tags=[{"Key": key, "Value": value} for key, value in tags.items()],
    )
    return str(response["TrainingJobArn"])


def tags_of(client: Any, arn: str) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in client.list_tags(ResourceArn=arn)["Tags"]}


def test_direct_training_jobs_are_tagged_with_the_derived_priority(sagemaker: Any) -> None:
    # Given an enabled job (ARN unknown to the registry), a job that did not opt in, and a vanished job
    enabled_arn = training_job(sagemaker, "train-on", ENABLED)
    other_arn = training_job(sagemaker, "train-off", {"team": "vision"})
    changes = [
        PriorityChange(record(Backend.SAGEMAKER, "train-gone", [], applied_priority=10), 20),
        PriorityChange(record(Backend.SAGEMAKER, "train-on", [], applied_priority=50), 58),
        PriorityChange(record(Backend.SAGEMAKER, "train-off", [], arn=other_arn, applied_priority=50), 58),
    ]

    # When applied
    report = TrainingJobTagApplier(sagemaker).apply(changes)

    # Then the enabled job carries osprey:derived-priority=58, the other is untouched, the vanished one failed
    assert tags_of(sagemaker, enabled_arn)[DERIVED_PRIORITY_TAG] == "58"
    assert DERIVED_PRIORITY_TAG not in tags_of(sagemaker, other_arn)
    gone, on, off = (report.by_job()[change.record.key] for change in changes)
    assert gone.outcome is Outcome.FAILED
    assert "train-gone" in gone.reason
    assert on.outcome is Outcome.APPLIED
    assert off.outcome is Outcome.SKIPPED
    assert report.writes == 1

    # And a second pass whose registry write was lost finds the tag in place and does not write again
    again = TrainingJobTagApplier(sagemaker).apply([changes[1]])
    assert again.results[0].reason == "already set"
    assert again.writes == 0


def test_apply_all_routes_by_backend_and_reports_backends_without_an_applier(sagemaker: Any) -> None:
    training_job(sagemaker, "train-on", ENABLED)
    changes = [
        PriorityChange(record(Backend.SAGEMAKER, "train-on", [], applied_priority=50), 51),
        PriorityChange(record(Backend.EKS, "ns/job", [], applied_priority=50), 51),
    ]

    report = apply_all(changes, [TrainingJobTagApplier(sagemaker), BatchShareApplier(object())])

    outcomes = [result.outcome for result in report.results]
    assert outcomes == [Outcome.SKIPPED, Outcome.APPLIED]
    assert "no applier configured for backend eks" in report.results[0].reason
