"""Fixtures for gang tests: a moto registry table (credentials, moto serialisation and the fake Kubernetes
API server come from tests/control/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.registry.table import create_table

TABLE = "osprey-registry"


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        yield client
