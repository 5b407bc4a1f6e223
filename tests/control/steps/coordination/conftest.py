"""A moto registry table and the cycle lease on it, shared by the lease, shard-plan and fencing tests."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from moto import mock_aws

from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.lease import CycleLease

TABLE = "osprey-coordination-test"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def registry() -> Iterator[JobRegistry]:
    with mock_aws():
        registry = JobRegistry(TABLE, boto3.client("dynamodb", region_name="us-east-1"), shards=4)
        registry.create_table()
        yield registry


@pytest.fixture
def lease(registry: JobRegistry) -> CycleLease:
    return CycleLease(TABLE, registry.client)
