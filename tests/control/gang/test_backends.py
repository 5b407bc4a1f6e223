"""Readiness and fallbacks per AWS backend, against botocore's Stubber (it validates every request against the
real service model; moto has no service jobs and jumps SageMaker jobs straight to Completed, DESIGN §9)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber

from osprey_control.backends.batch import BatchGang
from osprey_control.backends.sagemaker import SageMakerGang
from osprey_control.backends.sagemaker_queue import SageMakerQueuedGang
from osprey_control.gang import NotOptedInError, Readiness

ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/llm-pretrain"


def _training_job(status: str, secondary: str, hosts: int = 4) -> dict[str, Any]:
    return {
        "TrainingJobName": "llm-pretrain",
        "TrainingJobArn": ARN,
        "TrainingJobStatus": status,
        "SecondaryStatus": secondary,
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 100},
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "image"},
        "RoleArn": "arn:aws:iam::123456789012:role/sagemaker",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CreationTime": "2026-12-01T12:00:00Z",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://bucket/out/model.tar.gz"},
    }


@pytest.mark.parametrize(
    ("status", "secondary", "expected"),
    [
        ("InProgress", "Starting", Readiness(0, 4, detail="SecondaryStatus Starting")),
        ("InProgress", "Downloading", Readiness(0, 4, detail="SecondaryStatus Downloading")),
        ("InProgress", "Training", Readiness(4, 4, detail="SecondaryStatus Training")),
        ("Stopped", "Stopped", Readiness(0, 4, finished=True, detail="training job Stopped")),
    ],
)
def test_sagemaker_hosts_are_all_up_once_secondary_status_reaches_training(
    sagemaker: tuple[Any, Stubber], status: str, secondary: str, expected: Readiness
) -> None:
    client, stubber = sagemaker
    stubber.add_response(
        "describe_training_job", _training_job(status, secondary), {"TrainingJobName": "llm-pretrain"}
    )
    assert SageMakerGang("llm-pretrain", client=client).readiness() == expected


def test_sagemaker_fail_stops_only_an_osprey_tagged_job(sagemaker: tuple[Any, Stubber]) -> None:
    client, stubber = sagemaker
    for tags in ([{"Key": "osprey:enabled", "Value": "true"}], [{"Key": "team", "Value": "nlp"}]):
        stubber.add_response(
            "describe_training_job",
            _training_job("InProgress", "Starting"),
            {"TrainingJobName": "llm-pretrain"},
        )
        stubber.add_response("list_tags", {"Tags": tags}, {"ResourceArn": ARN})
        if tags[0]["Key"] == "osprey:enabled":
            stubber.add_response("stop_training_job", {}, {"TrainingJobName": "llm-pretrain"})
    gang = SageMakerGang("llm-pretrain", client=client)
    gang.stop()  # tagged: stopped
    with pytest.raises(NotOptedInError, match="not tagged osprey:enabled=true"):
        gang.stop()  # untagged: refused, no StopTrainingJob request
    assert gang.supports_requeue is False


def _service_job(status: str, *, attempt: bool, tags: dict[str, str] | None = None) -> dict[str, Any]:
    job: dict[str, Any] = {
        "jobId": "svc-1",
        "jobName": "llm-pretrain",
        "jobQueue": "arn:aws:batch:us-east-1:123456789012:job-queue/osprey-sagemaker",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "status": status,
        "startedAt": 1,
        "serviceRequestPayload": json.dumps({"ResourceConfig": {"InstanceCount": 4}}),
        "tags": tags or {"osprey:enabled": "true"},
    }
    if attempt:
        job["latestAttempt"] = {"serviceResourceId": {"name": "TrainingJobArn", "value": ARN}}
    return job


def test_queued_sagemaker_readiness_follows_the_attempts_training_job(
    batch: tuple[Any, Stubber], sagemaker: tuple[Any, Stubber]
) -> None:
    batch_client, batch_stub = batch
    sm_client, sm_stub = sagemaker
    batch_stub.add_response(
        "describe_service_job", _service_job("RUNNABLE", attempt=False), {"jobId": "svc-1"}
    )
    batch_stub.add_response("describe_service_job", _service_job("RUNNING", attempt=True), {"jobId": "svc-1"})
    sm_stub.add_response(
        "describe_training_job", _training_job("InProgress", "Training"), {"TrainingJobName": "llm-pretrain"}
    )
    batch_stub.add_response(
        "describe_service_job", _service_job("SUCCEEDED", attempt=True), {"jobId": "svc-1"}
    )
    gang = SageMakerQueuedGang("svc-1", batch_client=batch_client, sagemaker_client=sm_client)
    assert gang.readiness() == Readiness(0, 4, detail="service job RUNNABLE, no training job yet")
    assert gang.readiness() == Readiness(4, 4, detail="SecondaryStatus Training")
    assert gang.readiness().finished


def test_queued_sagemaker_fail_terminates_the_service_job(batch: tuple[Any, Stubber]) -> None:
    client, stubber = batch
    stubber.add_response("describe_service_job", _service_job("RUNNING", attempt=True), {"jobId": "svc-1"})
    stubber.add_response(
        "terminate_service_job",
        {},
        {"jobId": "svc-1", "reason": "Osprey: gang not ready within its timeout (fallback fail)"},
    )
    SageMakerQueuedGang("svc-1", batch_client=client).stop()


def _batch_job(job_id: str, status: str, nodes: int | None = None, **extra: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "jobId": job_id,
        "jobName": "mnp",
        "jobQueue": "queue",
        "status": status,
        "jobDefinition": "def",
        "startedAt": 1,
        **extra,
    }
    if nodes is not None:
        job["nodeProperties"] = {"numNodes": nodes, "mainNode": 0, "nodeRangeProperties": []}
    return job


def test_batch_multinode_readiness_counts_running_node_jobs(batch: tuple[Any, Stubber]) -> None:
    client, stubber = batch
    stubber.add_response("describe_jobs", {"jobs": [_batch_job("j1", "RUNNING", 3)]}, {"jobs": ["j1"]})
    nodes = [_batch_job("j1#0", "RUNNING"), _batch_job("j1#1", "RUNNING"), _batch_job("j1#2", "STARTING")]
    stubber.add_response("describe_jobs", {"jobs": nodes}, {"jobs": ["j1#0", "j1#1", "j1#2"]})
    assert BatchGang("j1", client=client).readiness() == Readiness(2, 3, detail="2/3 node jobs RUNNING")


def test_batch_node_jobs_are_described_at_most_100_per_call(batch: tuple[Any, Stubber]) -> None:
    client, stubber = batch
    stubber.add_response("describe_jobs", {"jobs": [_batch_job("j1", "RUNNING", 150)]}, {"jobs": ["j1"]})
    ids = [f"j1#{n}" for n in range(150)]
    for chunk in (ids[:100], ids[100:]):
        stubber.add_response(
            "describe_jobs", {"jobs": [_batch_job(i, "RUNNING") for i in chunk]}, {"jobs": chunk}
        )
    assert BatchGang("j1", client=client).readiness().ready_workers == 150


def test_batch_fail_terminates_only_a_tagged_job(batch: tuple[Any, Stubber]) -> None:
    client, stubber = batch
    tagged = _batch_job("j1", "RUNNING", 2, tags={"osprey:enabled": "true"})
    stubber.add_response("describe_jobs", {"jobs": [tagged]}, {"jobs": ["j1"]})
    stubber.add_response(
        "terminate_job",
        {},
        {"jobId": "j1", "reason": "Osprey: gang not ready within its timeout (fallback fail)"},
    )
    stubber.add_response("describe_jobs", {"jobs": [_batch_job("j1", "RUNNING", 2)]}, {"jobs": ["j1"]})
    gang = BatchGang("j1", client=client)
    gang.stop()
    with pytest.raises(NotOptedInError):
        gang.stop()
