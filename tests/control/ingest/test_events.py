"""Given the canned EventBridge events of the five handled detail-types, when parsed, then each says what the
registry needs (job identity, Osprey status, tags, environment, nodes, spot risk); broken events are refused
with a message naming the field."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from osprey_control.ingest import (
    IgnoredEvent,
    JobEvent,
    MalformedEventError,
    SpotEvent,
    parse_event,
)
from osprey_control.registry import Backend, JobStatus, NodeKind
from tests.control.ingest.conftest import BATCH, INTERRUPTION, REBALANCE, SAGEMAKER, SERVICE, load_event


def test_sagemaker_event_names_the_job_its_tags_and_its_hosts() -> None:
    parsed = parse_event(load_event(SAGEMAKER))
    assert isinstance(parsed, JobEvent)
    assert (parsed.backend, parsed.native_id, parsed.status) == (
        Backend.SAGEMAKER,
        "llama-pretrain-2026-03-01",
        JobStatus.RUNNING,
    )
    assert parsed.event_time == datetime(2026, 3, 1, 12, 5, tzinfo=UTC)
    assert parsed.tags is not None
    assert parsed.tags["osprey:policy"] == "training-policy"
    assert parsed.submitted_at == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    # Hosts are named like the Host dimension of /aws/sagemaker/TrainingJobs, with the GPUs of a p4d
    assert [(node.node_id, node.kind, node.gpus) for node in parsed.nodes] == [
        ("llama-pretrain-2026-03-01/algo-1", NodeKind.HOST, 8),
        ("llama-pretrain-2026-03-01/algo-2", NodeKind.HOST, 8),
    ]


def test_batch_event_carries_tags_environment_queue_and_container_instance() -> None:
    parsed = parse_event(load_event(BATCH))
    assert isinstance(parsed, JobEvent)
    assert (parsed.backend, parsed.native_id, parsed.name, parsed.status) == (
        Backend.BATCH,
        "4c7599ae-0a82-49aa-ba5a-4727fcce14a8",
        "resnet-finetune",
        JobStatus.RUNNING,
    )
    assert parsed.tags is not None
    assert parsed.tags["osprey:enabled"] == "true"
    assert parsed.environment == {"EPOCHS": "3"}
    assert parsed.job_queue == "arn:aws:batch:us-east-1:123456789012:job-queue/osprey-gpu"
    assert parsed.share_identifier == "research"
    assert parsed.container_instance_arn is not None


def test_service_job_event_is_a_queued_sagemaker_job_keyed_by_service_job_id() -> None:
    parsed = parse_event(load_event(SERVICE))
    assert isinstance(parsed, JobEvent)
    assert (parsed.backend, parsed.native_id, parsed.status) == (
        Backend.SAGEMAKER_QUEUED,
        "0bb17543-ece6-4480-b1a7-a556d344746b",
        JobStatus.RUNNING,
    )
    # The name is the training job Batch created, which is what SageMaker's metrics are keyed by
    assert parsed.name == parsed.training_job == "AWSBatchllama-queued88b610a69aa8380ca5b0a7aba3f81cb8"
    assert parsed.tags is None  # service job events never carry tags


@pytest.mark.parametrize(
    ("name", "risk", "kind"), [(INTERRUPTION, 1.0, "interruption"), (REBALANCE, 0.5, "rebalance")]
)
def test_spot_events_carry_the_instance_and_its_risk(name: str, risk: float, kind: str) -> None:
    parsed = parse_event(load_event(name))
    assert isinstance(parsed, SpotEvent)
    assert (parsed.instance_id, parsed.risk, parsed.kind) == ("i-1234567890abcdef0", risk, kind)


def test_unknown_fields_are_tolerated() -> None:
    event = load_event(BATCH)
    event["detail"]["somethingAwsAddsNextYear"] = {"nested": [1, 2]}
    event["newEnvelopeField"] = True
    assert isinstance(parse_event(event), JobEvent)


def test_other_detail_types_are_ignored() -> None:
    event = load_event(BATCH)
    event["detail-type"] = "Batch Job Queue Blocked"
    assert isinstance(parse_event(event), IgnoredEvent)


def _without(name: str, *path: str) -> dict[str, Any]:
    event = load_event(name)
    target = event
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return event


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ("not an object", "JSON object"),
        (_without(BATCH, "detail-type"), "detail-type must be a string"),
        (_without(BATCH, "time"), "time must be an ISO 8601 time"),
        (_without(BATCH, "detail"), "detail must be an object"),
        (_without(BATCH, "detail", "jobId"), "detail.jobId must be a non-empty string"),
        (_without(SAGEMAKER, "detail", "TrainingJobStatus"), "detail.TrainingJobStatus"),
        (_without(INTERRUPTION, "detail", "instance-id"), "detail.instance-id"),
        ({**load_event(BATCH), "detail": {**load_event(BATCH)["detail"], "status": "EXPLODED"}}, "EXPLODED"),
    ],
)
def test_malformed_events_name_the_field(event: Any, message: str) -> None:
    with pytest.raises(MalformedEventError, match=message) as raised:
        parse_event(event)
    assert "dropped" in str(raised.value)
