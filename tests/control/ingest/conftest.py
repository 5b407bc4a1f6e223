"""Canned EventBridge events (tests/events, shaped like the AWS documentation's examples) and a moto registry."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.registry.dynamodb import JobRegistry

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
