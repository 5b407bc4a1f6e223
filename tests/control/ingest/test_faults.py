"""Given a good event and a broken deployment (the role denied, the table missing, an item DynamoDB refuses as
too large), when the real ingest handler runs, then the record is a batch item failure (SQS redelivers it, then
keeps it in the dead-letter queue, whose alarm fires) and it is not counted as a dropped event; the event's own
faults are still dropped (issue 28 item 7)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from osprey_control.ingest import Ingestor, Recogniser
from osprey_control.ingest.faults import InfrastructureError
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.telemetry import MetricPoint
from tests.control.ingest.conftest import BATCH, SERVICE, TABLE, ingest_context, load_event, sqs_batch

TOO_LARGE = "Item size has exceeded the maximum allowed size"


def _good_batch_body() -> str:
    event = load_event(BATCH)
    del event["detail"]["container"]["containerInstanceArn"]  # no ECS lookup
    return json.dumps(event)


@pytest.fixture
def published(ingest_module: Any, monkeypatch: pytest.MonkeyPatch) -> list[MetricPoint]:
    points: list[MetricPoint] = []

    def publish(new: list[MetricPoint], namespace: str) -> int:
        points.extend(new)
        return len(new)

    monkeypatch.setattr(ingest_module, "publish", publish)
    return points


@pytest.fixture
def stubbed_dynamodb() -> Iterator[Stubber]:
    stubber = Stubber(boto3.client("dynamodb", region_name="us-east-1"))
    stubber.activate()
    yield stubber
    stubber.deactivate()


def _run(ingest_module: Any, ingestor: Ingestor | None, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A batch of a malformed body (the event's fault) and a good job event."""
    if ingestor is not None:
        monkeypatch.setattr(ingest_module, "ingestor", cache(lambda: ingestor))
    return ingest_module.handler(sqs_batch("not json", _good_batch_body()), ingest_context())


def _dropped(points: list[MetricPoint]) -> dict[str, float]:
    return {
        point.dimensions["Reason"]: sum(point.values) for point in points if point.name == "EventsDropped"
    }


def test_a_missing_registry_table_sends_the_event_to_the_dead_letter_queue_not_the_drop_counter(
    ingest_module: Any, published: list[MetricPoint], dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the registry table is gone (ResourceNotFoundException on every call)
    dynamodb.delete_table(TableName=TABLE)
    # When a good job event is ingested
    response = _run(ingest_module, None, monkeypatch)
    # Then its record fails (redelivered, then dead-lettered) and is not counted as a drop; only the malformed
    # body of the same batch is
    assert response == {"batchItemFailures": [{"itemIdentifier": "message-1"}]}
    assert _dropped(published) == {"malformed": 1.0}


@pytest.mark.parametrize(
    ("operation", "code", "message"),
    [
        ("get_item", "AccessDeniedException", "not authorized to perform: dynamodb:GetItem"),
        ("put_item", "ValidationException", TOO_LARGE),
    ],
    ids=["access-denied", "item-too-large"],
)
def test_a_refused_registry_write_is_an_infrastructure_fault(
    operation: str,
    code: str,
    message: str,
    *,
    ingest_module: Any,
    published: list[MetricPoint],
    stubbed_dynamodb: Stubber,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a registry whose role is denied, or whose item DynamoDB refuses as too large
    if operation == "put_item":
        stubbed_dynamodb.add_response("get_item", {})
    stubbed_dynamodb.add_client_error(operation, service_error_code=code, service_message=message)
    registry = JobRegistry(TABLE, stubbed_dynamodb.client, shards=4)
    ingestor = Ingestor(registry, recogniser=Recogniser())
    # When a good job event is ingested
    response = _run(ingest_module, ingestor, monkeypatch)
    # Then its record fails and goes the dead-letter path; only the malformed body is counted as dropped
    assert response == {"batchItemFailures": [{"itemIdentifier": "message-1"}]}
    assert _dropped(published) == {"malformed": 1.0}
    stubbed_dynamodb.assert_no_pending_responses()


def test_a_lookup_the_role_may_not_make_is_a_fault_and_a_job_that_is_not_there_is_the_events(
    registry: JobRegistry,
) -> None:
    # Given a service job event (recognition must call DescribeServiceJob)
    batch = boto3.client("batch", region_name="us-east-1")
    body = json.dumps(load_event(SERVICE))
    with Stubber(batch) as stubber:
        # When the role is denied the lookup, then the event is an infrastructure fault (dead-letter queue)
        stubber.add_client_error("describe_service_job", "AccessDeniedException", "not authorized", 403)
        with pytest.raises(InfrastructureError, match="role is refused"):
            Ingestor(registry, recogniser=Recogniser(batch=batch)).ingest_message(body)
        # And when the job is not found, the event is dropped: the lookup named the event's job, not Osprey's
        stubber.add_client_error("describe_service_job", "ResourceNotFoundException", "no such job", 404)
        outcome = Ingestor(registry, recogniser=Recogniser(batch=batch)).ingest_message(body)
        assert (outcome.action, outcome.reason) == ("dropped", "rejected")
