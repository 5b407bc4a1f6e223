"""The plan step's AWS for the planner tests that run it: moto DynamoDB with the registry table, and CloudWatch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.registry.table import create_table

TABLE = "osprey-jobs"


@dataclass
class Aws:
    dynamodb: Any
    cloudwatch: Any


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(dynamodb, TABLE)
        yield Aws(dynamodb, boto3.client("cloudwatch", region_name="us-east-1"))
