"""Canned EventBridge events (tests/events, shaped like the AWS documentation's examples) and a moto registry."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext
from moto import mock_aws

from osprey_control.registry.dynamodb import JobRegistry
from tests.lambda_context import lambda_context

EVENTS = Path(__file__).resolve().parents[2] / "events"
TABLE = "osprey-jobs-ingest"

SAGEMAKER = "sagemaker_training_job_state_change.json"
BATCH = "batch_job_state_change.json"
SERVICE = "batch_service_job_state_change.json"
INTERRUPTION = "ec2_spot_instance_interruption_warning.json"
REBALANCE = "ec2_instance_rebalance_recommendation.json"


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return copy.deepcopy(event)


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def dynamodb(aws: None) -> Any:
    return boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def registry(dynamodb: Any) -> JobRegistry:
    registry = JobRegistry(TABLE, dynamodb, shards=4)
    registry.create_table()
    return registry


def item_count(dynamodb: Any) -> int:
    count: int = dynamodb.scan(TableName=TABLE, Select="COUNT")["Count"]
    return count


def ingest_context() -> LambdaContext:
    """The context of a fresh invocation of the ingest function."""
    return lambda_context("osprey-ingest", 256, "6f6a3b7e-0000-4000-8000-000000000000")


def sqs_batch(*bodies: str) -> dict[str, Any]:
    """An SQS event source batch of ``bodies``, message ids ``message-<index>``."""
    return {
        "Records": [
            {
                "messageId": f"message-{index}",
                "receiptHandle": f"handle-{index}",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:osprey-ingest",
                "awsRegion": "us-east-1",
            }
            for index, body in enumerate(bodies)
        ]
    }


@pytest.fixture
def ingest_module(registry: JobRegistry, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The ingest Lambda's module on ``registry``'s table, its caches cleared around the test."""
    monkeypatch.setenv("OSPREY_TABLE_NAME", TABLE)
    monkeypatch.setenv("OSPREY_REGISTRY_SHARDS", "4")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    from osprey_handlers import ingest  # noqa: PLC0415 - import after the environment is set

    ingest.ingestor.cache_clear()
    ingest.settings.cache_clear()
    yield ingest
    ingest.ingestor.cache_clear()
    ingest.settings.cache_clear()
