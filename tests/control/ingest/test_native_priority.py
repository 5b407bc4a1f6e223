"""Given a queued SageMaker job (a Batch service job) submitted with a ``schedulingPriority``, when its event is
ingested, then the registry records that value as the job's native priority (what the guard's native order
keeps it at); a service job whose description has none records none."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from osprey_control.ingest import Ingestor, Recogniser
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.ingest.conftest import SERVICE, load_event

JOB_ID = "0bb17543-ece6-4480-b1a7-a556d344746b"


def _described(**extra: Any) -> dict[str, Any]:
    payload = {
        "TrainingJobName": "llama-queued",
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "VolumeSizeInGB": 500},
        "Tags": [
            {"Key": "osprey:enabled", "Value": "true"},
            {"Key": "osprey:policy", "Value": "training-policy"},
        ],
    }
    return {
        "jobId": JOB_ID, "jobName": "llama-queued", "jobQueue": "osprey-sagemaker",
        "serviceJobType": "SAGEMAKER_TRAINING", "startedAt": 1772366900058, "status": "RUNNING",
        "serviceRequestPayload": json.dumps(payload), **extra,
    }  # fmt: skip


@pytest.mark.parametrize(("described", "native"), [({"schedulingPriority": 4200}, 4200), ({}, None)])
def test_the_submitted_scheduling_priority_is_the_native_priority(
    registry: JobRegistry, described: dict[str, Any], native: int | None
) -> None:
    # Given DescribeServiceJob (stubbed: moto has no service jobs) with or without a schedulingPriority
    batch = boto3.client("batch", region_name="us-east-1")
    with Stubber(batch) as stubber:
        stubber.add_response("describe_service_job", _described(**described), {"jobId": JOB_ID})
        # When its state change event is ingested
        Ingestor(registry, recogniser=Recogniser(batch=batch)).ingest(load_event(SERVICE))
    # Then the registry holds it as the job's native priority (or nothing)
    record = registry.get(JobKey(Backend.SAGEMAKER_QUEUED, JOB_ID))
    assert record is not None
    assert record.native_priority == native
