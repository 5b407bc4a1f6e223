"""Fixtures for gang tests: fake AWS credentials, a moto registry table, a fake Kubernetes API server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.eks.client import KubernetesClient
from osprey_control.registry.table import create_table
from tests.control.eks.fake_k8s import FakeKubernetes, run_fake

TABLE = "osprey-registry"


@pytest.fixture(autouse=True)
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        yield client


@pytest.fixture
def fake_k8s() -> Iterator[FakeKubernetes]:
    yield from run_fake(FakeKubernetes())


@pytest.fixture
def k8s_client(fake_k8s: FakeKubernetes) -> KubernetesClient:
    return KubernetesClient(fake_k8s.url, timeout=5, max_attempts=2, backoff=0, sleep=lambda _: None)
