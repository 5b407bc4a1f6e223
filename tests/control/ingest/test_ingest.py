"""Given canned events and moto (Stubber where moto lacks an API, DESIGN §9), when ingested, then Osprey jobs land
in the registry with their policy, status and nodes, other jobs cost no write, and spot warnings reach the job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from osprey_control.ingest import Ingestor, Recogniser
from osprey_control.registry import Backend, JobKey, JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.ingest.conftest import (
    BATCH,
    INTERRUPTION,
    REBALANCE,
    SAGEMAKER,
    SERVICE,
    item_count,
    load_event,
)

SAGEMAKER_KEY = JobKey(Backend.SAGEMAKER, "llama-pretrain-2026-03-01")
BATCH_KEY = JobKey(Backend.BATCH, "4c7599ae-0a82-49aa-ba5a-4727fcce14a8")
SERVICE_KEY = JobKey(Backend.SAGEMAKER_QUEUED, "0bb17543-ece6-4480-b1a7-a556d344746b")
INSTANCE = "i-1234567890abcdef0"
CONTAINER_INSTANCE = "arn:aws:ecs:us-east-1:123456789012:container-instance/AWSBatch-gpu-ce-1a2b3c/0f1e2d3c4b5a69788796a5b4c3d2e1f0"
OSPREY_ENV = {"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "env-policy"}


@pytest.fixture
def stubbed() -> Iterator[dict[str, Stubber]]:
    """Stubbed SageMaker, Batch and ECS clients; each test queues only the calls it expects."""
    clients = {name: boto3.client(name, region_name="us-east-1") for name in ("sagemaker", "batch", "ecs")}
    stubbers = {name: Stubber(client) for name, client in clients.items()}
    for stubber in stubbers.values():
        stubber.activate()
    yield stubbers
    for stubber in stubbers.values():
        stubber.assert_no_pending_responses()
        stubber.deactivate()


def _ingestor(registry: JobRegistry, stubbed: dict[str, Stubber], **kwargs: Any) -> Ingestor:
    recogniser = Recogniser(sagemaker=stubbed["sagemaker"].client, batch=stubbed["batch"].client, **kwargs)
    return Ingestor(registry, recogniser=recogniser, ecs=stubbed["ecs"].client)


def _expect_container_instance(stubbed: dict[str, Stubber]) -> None:
    stubbed["ecs"].add_response(
        "describe_container_instances",
        {"containerInstances": [{"containerInstanceArn": CONTAINER_INSTANCE, "ec2InstanceId": INSTANCE}]},
        {"cluster": "AWSBatch-gpu-ce-1a2b3c", "containerInstances": [CONTAINER_INSTANCE]},
    )


def _training_job(environment: dict[str, str]) -> dict[str, Any]:
    return {
        "TrainingJobName": SAGEMAKER_KEY.native_id,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{SAGEMAKER_KEY.native_id}",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://example-bucket/output/model.tar.gz"},
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "CreationTime": datetime(2026, 3, 1, 12, tzinfo=UTC),
        "Environment": environment,
    }


def test_tagged_sagemaker_job_is_registered_from_its_event(registry: JobRegistry, stubbed: Any) -> None:
    # Given a SageMaker event whose Tags opt the job in, when ingested (no AWS lookup is queued)
    outcome = _ingestor(registry, stubbed).ingest(load_event(SAGEMAKER))
    # Then the job is registered with its policy, gang settings, status and hosts
    record = registry.get(SAGEMAKER_KEY)
    assert (outcome.action, outcome.reason) == ("registered", "tags")
    assert record is not None
    assert (record.policy, record.block.co_schedule, record.block.gang_timeout) == (
        "training-policy",
        True,
        180,
    )
    assert record.status is JobStatus.RUNNING
    assert [node.node_id for node in record.nodes] == [
        "llama-pretrain-2026-03-01/algo-1",
        "llama-pretrain-2026-03-01/algo-2",
    ]
    assert {node.instance_type for node in record.nodes} == {"ml.p4d.24xlarge"}
    assert [job.native_id for job in registry.list_active()] == [SAGEMAKER_KEY.native_id]
    # ... and the tags that opted it in are kept on the record
    assert record.tags["osprey:enabled"] == "true"
    assert record.tags["osprey:policy"] == "training-policy"


def test_untagged_sagemaker_job_is_recognised_by_its_environment(registry: JobRegistry, stubbed: Any) -> None:
    # Given a job tagged without osprey:* tags but with OSPREY_ENABLED in its environment (moto's
    # DescribeTrainingJob does not return Environment, so the call is stubbed)
    event = load_event(SAGEMAKER)
    event["detail"]["Tags"] = {"team": "research"}
    stubbed["sagemaker"].add_response(
        "describe_training_job", _training_job(OSPREY_ENV), {"TrainingJobName": SAGEMAKER_KEY.native_id}
    )
    # When ingested
    outcome = _ingestor(registry, stubbed).ingest(event)
    # Then it is managed under the environment's policy
    assert (outcome.action, outcome.reason) == ("registered", "environment")
    assert registry.get(SAGEMAKER_KEY).policy == "env-policy"  # type: ignore[union-attr]


def test_sagemaker_event_without_tags_asks_list_tags(registry: JobRegistry, aws: None) -> None:
    # Given a training job tagged in SageMaker (moto) and an event that carries no Tags key
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    arn = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{SAGEMAKER_KEY.native_id}"
    sagemaker.create_training_job(
        TrainingJobName=SAGEMAKER_KEY.native_id,
        AlgorithmSpecification={"TrainingImage": "image:latest", "TrainingInputMode": "File"},
        RoleArn="arn:aws:iam::123456789012:role/SMRole",
        OutputDataConfig={"S3OutputPath": "s3://example-bucket/output"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 200},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        Tags=[{"Key": "osprey:enabled", "Value": "true"}, {"Key": "osprey:policy", "Value": "tagged-policy"}],
    )
    event = load_event(SAGEMAKER)
    del event["detail"]["Tags"]
    event["detail"]["TrainingJobArn"] = arn
    # When ingested
    outcome = Ingestor(registry, recogniser=Recogniser(sagemaker=sagemaker)).ingest(event)
    # Then ListTags recognised it
    assert (outcome.action, outcome.reason) == ("registered", "tags")
    assert registry.get(SAGEMAKER_KEY).policy == "tagged-policy"  # type: ignore[union-attr]


def test_non_osprey_jobs_are_ignored_without_a_write(
    registry: JobRegistry, dynamodb: Any, stubbed: Any
) -> None:
    # Given events of jobs that do not opt in: a Batch job whose tags and environment say nothing, and a
    # SageMaker job with neither tags nor environment
    batch = load_event(BATCH)
    batch["detail"]["tags"] = {"team": "research"}
    sagemaker = load_event(SAGEMAKER)
    sagemaker["detail"]["Tags"] = {}
    stubbed["sagemaker"].add_response(
        "describe_training_job", _training_job({}), {"TrainingJobName": SAGEMAKER_KEY.native_id}
    )
    ingestor = _ingestor(registry, stubbed)
    # When both are ingested, twice (the second time from the recognition cache: no lookup is queued)
    outcomes = [ingestor.ingest(event) for event in (batch, sagemaker, batch, sagemaker)]
    # Then nothing is written
    assert {(outcome.action, outcome.reason) for outcome in outcomes} == {("ignored", "not an Osprey job")}
    assert item_count(dynamodb) == 0


def test_invalid_contract_is_not_managed(registry: JobRegistry, dynamodb: Any, stubbed: Any) -> None:
    event = load_event(BATCH)
    event["detail"]["tags"]["osprey:gang-timeout"] = "soon"
    assert _ingestor(registry, stubbed).ingest(event).action == "ignored"
    assert item_count(dynamodb) == 0


def test_batch_job_registers_with_its_ec2_instance(registry: JobRegistry, stubbed: Any) -> None:
    # Given a RUNNING Batch job on an ECS container instance
    _expect_container_instance(stubbed)
    # When ingested
    outcome = _ingestor(registry, stubbed).ingest(load_event(BATCH))
    # Then the job knows its queue, share and the EC2 instance it runs on
    record = registry.get(BATCH_KEY)
    assert outcome.action == "registered"
    assert record is not None
    assert (record.job_queue, record.share_identifier) == (
        "arn:aws:batch:us-east-1:123456789012:job-queue/osprey-gpu",
        "research",
    )
    assert [node.instance_id for node in record.nodes] == [INSTANCE]


def test_a_multi_node_batch_job_node_knows_its_index_and_instance_type(
    registry: JobRegistry, stubbed: Any
) -> None:
    # Given node 3 of a multi-node Batch job, on a p5 container instance
    stubbed["ecs"].add_response(
        "describe_container_instances",
        {
            "containerInstances": [
                {
                    "containerInstanceArn": CONTAINER_INSTANCE,
                    "ec2InstanceId": INSTANCE,
                    "attributes": [{"name": "ecs.instance-type", "value": "p5.48xlarge"}],
                }
            ]
        },
        {"cluster": "AWSBatch-gpu-ce-1a2b3c", "containerInstances": [CONTAINER_INSTANCE]},
    )
    event = load_event(BATCH)
    event["detail"]["nodeDetails"] = {"nodeIndex": 3, "isMainNode": False}
    # When ingested
    _ingestor(registry, stubbed).ingest(event)
    # Then its node carries the index the runtime reports as Host and the instance type
    record = registry.get(BATCH_KEY)
    assert record is not None
    assert [(n.instance_id, n.node_index, n.instance_type) for n in record.nodes] == [
        (INSTANCE, 3, "p5.48xlarge")
    ]


@pytest.mark.parametrize("nodes_first", [False, True])
def test_multi_node_node_jobs_fold_into_the_parent_job_in_any_order(
    registry: JobRegistry, stubbed: Any, nodes_first: bool
) -> None:
    # Given the parent of a multi-node job (RUNNING, no container of its own) and its node jobs "<id>#N"
    parent = load_event(BATCH)
    del parent["detail"]["container"]
    parent["detail"]["nodeProperties"] = {"numNodes": 2, "mainNode": 0, "nodeRangeProperties": []}
    node_events = []
    for index, (instance, arn) in enumerate(
        [
            (INSTANCE, CONTAINER_INSTANCE),
            (
                "i-0fedcba987654321f",
                "arn:aws:ecs:us-east-1:123456789012:container-instance/AWSBatch-gpu-ce-1a2b3c/1f",
            ),
        ]
    ):
        node = load_event(BATCH)
        node["id"] = f"node-{index}"
        node["time"] = "2026-03-01T12:10:00Z"  # newer than the parent's event, and SUCCEEDED
        node["detail"]["jobId"] = f"{BATCH_KEY.native_id}#{index}"
        node["detail"]["jobArn"] = f"arn:aws:batch:us-east-1:123456789012:job/{BATCH_KEY.native_id}#{index}"
        node["detail"]["status"] = "SUCCEEDED"
        node["detail"]["nodeDetails"] = {"nodeIndex": index, "isMainNode": index == 0}
        node["detail"]["container"]["containerInstanceArn"] = arn
        cluster = "AWSBatch-gpu-ce-1a2b3c"
        stubbed["ecs"].add_response(
            "describe_container_instances",
            {"containerInstances": [{"containerInstanceArn": arn, "ec2InstanceId": instance}]},
            {"cluster": cluster, "containerInstances": [arn]},
        )
        node_events.append(node)
    ingestor = _ingestor(registry, stubbed)
    events = [*node_events, parent] if nodes_first else [parent, *node_events]
    # When all are ingested
    for event in events:
        ingestor.ingest(event)
    # Then one job is registered, the parent, with both nodes and the parent's own status (a node job
    # finishing never finishes the parent)
    record = registry.get(BATCH_KEY)
    assert record is not None
    assert record.status is JobStatus.RUNNING
    assert sorted((n.node_index, n.instance_id) for n in record.nodes) == [
        (0, INSTANCE),
        (1, "i-0fedcba987654321f"),
    ]
    assert registry.get(JobKey(Backend.BATCH, f"{BATCH_KEY.native_id}#0")) is None


def test_batch_event_without_tags_or_environment_asks_describe_jobs(
    registry: JobRegistry, stubbed: Any
) -> None:
    event = load_event(BATCH)
    del event["detail"]["tags"]
    del event["detail"]["container"]
    stubbed["batch"].add_response(
        "describe_jobs",
        {
            "jobs": [
                {
                    "jobName": "resnet-finetune",
                    "jobId": BATCH_KEY.native_id,
                    "jobQueue": "osprey-gpu",
                    "status": "RUNNING",
                    "startedAt": 1772366800058,
                    "jobDefinition": "resnet-finetune:1",
                    "container": {"environment": [{"name": k, "value": v} for k, v in OSPREY_ENV.items()]},
                }
            ]
        },
        {"jobs": [BATCH_KEY.native_id]},
    )
    outcome = _ingestor(registry, stubbed).ingest(event)
    assert (outcome.action, outcome.reason) == ("registered", "environment")
    assert registry.get(BATCH_KEY).policy == "env-policy"  # type: ignore[union-attr]


def test_service_job_is_recognised_through_describe_service_job(registry: JobRegistry, stubbed: Any) -> None:
    # Given a queued SageMaker job (moto has no service jobs: DescribeServiceJob is stubbed)
    payload = {
        "TrainingJobName": "llama-queued",
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "VolumeSizeInGB": 500},
        "Tags": [
            {"Key": "osprey:enabled", "Value": "true"},
            {"Key": "osprey:policy", "Value": "training-policy"},
        ],
    }
    stubbed["batch"].add_response(
        "describe_service_job",
        {
            "jobId": SERVICE_KEY.native_id,
            "jobName": "llama-queued",
            "jobQueue": "osprey-sagemaker",
            "serviceJobType": "SAGEMAKER_TRAINING",
            "startedAt": 1772366900058,
            "status": "RUNNING",
            "serviceRequestPayload": json.dumps(payload),
            "tags": {"osprey:enabled": "true", "osprey:policy": "training-policy"},
        },
        {"jobId": SERVICE_KEY.native_id},
    )
    # When its service job event is ingested
    outcome = _ingestor(registry, stubbed).ingest(load_event(SERVICE))
    # Then it is a sagemaker-queued job named after its training job, with that training job's hosts
    record = registry.get(SERVICE_KEY)
    assert outcome.action == "registered"
    assert record is not None
    assert record.name == "AWSBatchllama-queued88b610a69aa8380ca5b0a7aba3f81cb8"
    assert record.job_queue == "arn:aws:batch:us-east-1:123456789012:job-queue/osprey-sagemaker"
    assert [(node.node_id, node.gpus) for node in record.nodes] == [
        ("AWSBatchllama-queued88b610a69aa8380ca5b0a7aba3f81cb8/algo-1", 8),
        ("AWSBatchllama-queued88b610a69aa8380ca5b0a7aba3f81cb8/algo-2", 8),
    ]


def test_training_job_of_a_service_job_is_not_registered_twice(
    registry: JobRegistry, dynamodb: Any, stubbed: Any
) -> None:
    event = load_event(SAGEMAKER)
    event["detail"]["TrainingJobName"] = "AWSBatchllama-queued88b610a69aa8380ca5b0a7aba3f81cb8"
    assert _ingestor(registry, stubbed).ingest(event).action == "ignored"
    assert item_count(dynamodb) == 0


def test_spot_warnings_raise_the_risk_of_the_job_on_the_instance(registry: JobRegistry, stubbed: Any) -> None:
    # Given a Batch job running on the instance
    _expect_container_instance(stubbed)
    ingestor = _ingestor(registry, stubbed)
    ingestor.ingest(load_event(BATCH))
    # When a rebalance recommendation, then an interruption warning arrive
    rebalance = ingestor.ingest(load_event(REBALANCE))
    assert registry.get(BATCH_KEY).spot_risk == {INSTANCE: 0.5}  # type: ignore[union-attr]
    interruption = ingestor.ingest(load_event(INTERRUPTION))
    # Then the job's risk on that instance is 1.0 and both outcomes name the job
    assert registry.get(BATCH_KEY).spot_risk == {INSTANCE: 1.0}  # type: ignore[union-attr]
    assert rebalance.jobs == interruption.jobs == (BATCH_KEY,)


def test_duplicate_delivery_is_reported_and_changes_nothing(registry: JobRegistry, stubbed: Any) -> None:
    ingestor = _ingestor(registry, stubbed)
    first = ingestor.ingest(load_event(SAGEMAKER))
    again = ingestor.ingest(load_event(SAGEMAKER))
    assert (first.action, again.action) == ("registered", "duplicate")
    assert registry.get(SAGEMAKER_KEY).version == 1  # type: ignore[union-attr]


def test_completion_removes_the_job_from_the_active_list(registry: JobRegistry, stubbed: Any) -> None:
    ingestor = _ingestor(registry, stubbed)
    ingestor.ingest(load_event(SAGEMAKER))
    done = load_event(SAGEMAKER)
    done["time"] = "2026-03-01T18:00:00Z"
    done["detail"].update(TrainingJobStatus="Completed", SecondaryStatus="Completed")
    assert ingestor.ingest(done).action == "updated"
    assert registry.list_active() == []
    assert registry.get(SAGEMAKER_KEY).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]
