"""A moto-backed registry table per test."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.contract import OspreyBlock
from osprey_control.registry import Backend, JobStatus, NodeKind, NodeRef
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation

TABLE = "osprey-jobs-test"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def registry(dynamodb: Any) -> JobRegistry:
    registry = JobRegistry(TABLE, dynamodb, shards=4)
    registry.create_table()
    return registry


def observation(
    native_id: str = "llama-pretrain",
    status: JobStatus = JobStatus.RUNNING,
    *,
    at: datetime = T0,
    backend: Backend = Backend.BATCH,
    instances: tuple[str, ...] = (),
    policy: str = "training-policy",
) -> JobObservation:
    return JobObservation(
        backend=backend,
        native_id=native_id,
        name=native_id,
        block=OspreyBlock(priority_derivation_profile=policy),
        status=status,
        event_time=at,
        nodes=tuple(
            NodeRef(node_id=instance, kind=NodeKind.INSTANCE, instance_id=instance) for instance in instances
        ),
    )
