"""Given each event of tests/events/hostile in an SQS batch between two good events, when the real ingest
handler runs (registry on moto's DynamoDB), then the hostile record is dropped: it is not a batch item failure
(so SQS never redelivers it), its reason is logged and counted as EventsDropped, nothing of it reaches the
registry, and both good events of its batch are recorded."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from osprey_control.ingest import DropReason
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.telemetry import MetricPoint
from tests.control.ingest.conftest import (
    BATCH,
    EVENTS,
    SAGEMAKER,
    TABLE,
    ingest_context,
    load_event,
    sqs_batch,
)

HOSTILE = EVENTS / "hostile"
CASES = sorted(HOSTILE.glob("*.json"))
GOOD_SAGEMAKER = JobKey(Backend.SAGEMAKER, "good-sagemaker-job")
GOOD_BATCH = JobKey(Backend.BATCH, "good-batch-job")
SOURCES = ("any", "SageMaker", "Batch", "Batch service", "EC2 spot", "EC2 rebalance")


def _good_bodies() -> tuple[str, str]:
    sagemaker = load_event(SAGEMAKER)
    sagemaker["detail"]["TrainingJobName"] = GOOD_SAGEMAKER.native_id
    sagemaker["detail"]["TrainingJobArn"] = (
        f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{GOOD_SAGEMAKER.native_id}"
    )
    batch = load_event(BATCH)
    batch["detail"]["jobId"] = GOOD_BATCH.native_id
    batch["detail"]["jobArn"] = f"arn:aws:batch:us-east-1:123456789012:job/{GOOD_BATCH.native_id}"
    del batch["detail"]["container"]["containerInstanceArn"]
    return json.dumps(sagemaker), json.dumps(batch)


def _body(case: dict[str, Any]) -> str:
    return str(case["body"]) if "body" in case else json.dumps(case["event"])


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def ingest_logs() -> Iterator[_Records]:
    """What ingest logs (the handler's Powertools logger does not propagate, so listen on ingest's own)."""
    handler = _Records()
    logger = logging.getLogger("osprey_control.ingest.service")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def test_the_corpus_holds_at_least_30_events_of_every_source_and_reason() -> None:
    cases = [json.loads(path.read_text()) for path in CASES]
    assert len(cases) >= 30
    assert all(case["comment"] and set(case) & {"event", "body"} for case in cases)
    by_source = Counter(case["source"] for case in cases)
    assert set(by_source) == set(SOURCES)
    assert all(by_source[source] >= 3 for source in SOURCES if source != "EC2 rebalance")
    assert {case["reason"] for case in cases} == {reason.value for reason in DropReason}
    readme = (HOSTILE / "README.md").read_text()
    assert all(f"`{path.name}`" in readme for path in CASES)


@pytest.mark.parametrize("path", CASES, ids=lambda path: Path(path).stem)
def test_a_hostile_event_is_dropped_and_the_good_records_of_its_batch_are_recorded(
    path: Path,
    *,
    ingest_module: Any,
    registry: JobRegistry,
    dynamodb: Any,
    ingest_logs: _Records,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a batch of a good SageMaker event, the hostile event and a good Batch event
    case = json.loads(path.read_text())
    published: list[MetricPoint] = []

    def publish(points: list[MetricPoint], namespace: str) -> int:
        published.extend(points)
        return len(points)

    monkeypatch.setattr(ingest_module, "publish", publish)
    good_sagemaker, good_batch = _good_bodies()
    # When the ingest Lambda runs
    response = ingest_module.handler(sqs_batch(good_sagemaker, _body(case), good_batch), ingest_context())
    # Then no record is returned for redelivery (0 redeliveries of the hostile one)
    assert response == {"batchItemFailures": []}
    # And the registry holds the two good jobs, each written once, and nothing else (0 bad writes)
    keys = {item["pk"]["S"] for item in dynamodb.scan(TableName=TABLE)["Items"]}
    assert {GOOD_SAGEMAKER.native_id in key or GOOD_BATCH.native_id in key for key in keys} == {True}
    for good in (GOOD_SAGEMAKER, GOOD_BATCH):
        record = registry.get(good)
        assert record is not None
        assert record.version == 1
    # And the drop is counted once under its reason, and logged with it
    assert [(point.name, point.dimensions, point.values) for point in published] == [
        ("EventsDropped", {"Reason": case["reason"]}, (1.0,))
    ]
    drops = [record for record in ingest_logs.records if record.getMessage() == "event dropped"]
    assert [getattr(record, "reason", None) for record in drops] == [case["reason"]]


def test_dropped_events_are_published_as_emf(ingest_module: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a batch of two malformed events and one too large
    bodies = [
        _body(json.loads((HOSTILE / f"{name}.json").read_text()))
        for name in ("body_not_json", "body_empty", "sagemaker_5000_hosts")
    ]
    # When the ingest Lambda runs
    ingest_module.handler(sqs_batch(*bodies), ingest_context())
    # Then stdout holds EMF records of EventsDropped per reason in Osprey's namespace
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    counts = {document["Reason"]: document["EventsDropped"] for document in documents}
    assert counts == {"malformed": [2.0], "over-limit": [1.0]}
    assert {document["_aws"]["CloudWatchMetrics"][0]["Namespace"] for document in documents} == {
        "/aws/osprey"
    }
