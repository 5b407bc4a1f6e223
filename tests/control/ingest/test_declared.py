"""Given job descriptions as AWS writes them, when read at ingest, then the declared runtime limit and the GPUs
the job asks for are what the scheduler was told, and anything unknown stays None (never 0)."""

from __future__ import annotations

import json

import boto3
from botocore.stub import Stubber

from osprey_control.ingest import Ingestor, Recogniser
from osprey_control.ingest.events import JobEvent, parse_event
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.ingest.conftest import BATCH, SAGEMAKER, SERVICE, load_event


def test_given_the_sagemaker_event_when_parsed_then_stopping_condition_and_instance_gpus_are_read() -> None:
    # Given: the canned event (2 x ml.p4d.24xlarge, MaxRuntimeInSeconds 86400)
    event = parse_event(load_event(SAGEMAKER))

    # Then
    assert isinstance(event, JobEvent)
    assert (event.declared_runtime_s, event.requested_gpus) == (86400, 16)


def test_given_the_batch_event_when_parsed_then_timeout_and_gpu_requirement_are_read() -> None:
    event = parse_event(load_event(BATCH))
    assert isinstance(event, JobEvent)
    assert (event.declared_runtime_s, event.requested_gpus) == (7200, 1)


def test_given_a_service_job_when_ingested_then_its_payload_and_timeout_give_limit_and_gpus(
    registry: JobRegistry,
) -> None:
    # Given: DescribeServiceJob (stubbed: moto has no service jobs) with a payload limit tighter than the
    # event's Batch timeoutConfig (86400)
    batch = boto3.client("batch", region_name="us-east-1")
    payload = {
        "TrainingJobName": "llama-queued",
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "VolumeSizeInGB": 500},
        "StoppingCondition": {"MaxRuntimeInSeconds": 43200},
        "Tags": [
            {"Key": "osprey:enabled", "Value": "true"},
            {"Key": "osprey:policy", "Value": "training-policy"},
        ],
    }
    job_id = "0bb17543-ece6-4480-b1a7-a556d344746b"
    with Stubber(batch) as stubber:
        stubber.add_response(
            "describe_service_job",
            {
                "jobId": job_id, "jobName": "llama-queued", "jobQueue": "osprey-sagemaker",
                "serviceJobType": "SAGEMAKER_TRAINING", "startedAt": 1772366900058, "status": "RUNNING",
                "serviceRequestPayload": json.dumps(payload),
            },
            {"jobId": job_id},
        )  # fmt: skip

        # When
        Ingestor(registry, recogniser=Recogniser(batch=batch)).ingest(load_event(SERVICE))

    # Then: the tighter limit and 2 x 8 GPUs, and the running event opened an allocation on them
    record = registry.get(JobKey(Backend.SAGEMAKER_QUEUED, job_id))
    assert record is not None
    assert (record.declared_runtime_s, record.requested_gpus) == (43200, 16)
    (span,) = record.allocations.spans()
    assert (span.end, span.gpus) == (None, 16)
