"""Fixtures for control-plane tests: fake credentials so no test can reach a real AWS account, and moto's
request dispatch serialised (its DynamoDB is not thread-safe and the derive step writes from threads; see
``osprey.local.serial``, which ``osprey local`` and the end-to-end test use for the same reason), and stubbed
Batch and SageMaker clients (``batch``, ``sagemaker``: a client and its Stubber, every expected call made)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import boto3
import pytest
from botocore.stub import Stubber

from osprey.local.serial import serialized_moto
from osprey_control.backends.eks.client import KubernetesClient
from tests.control.backends.eks.fake_k8s import FakeKubernetes, run_fake

REGION = "us-east-1"
ACCOUNT = "123456789012"


@pytest.fixture(autouse=True)
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "POWERTOOLS_METRICS_NAMESPACE": "/aws/osprey",
        "POWERTOOLS_SERVICE_NAME": "osprey-test",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


def _stubbed(service: Literal["batch", "sagemaker"]) -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client(service, region_name=REGION)
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def batch() -> Iterator[tuple[Any, Stubber]]:
    yield from _stubbed("batch")


@pytest.fixture
def sagemaker() -> Iterator[tuple[Any, Stubber]]:
    yield from _stubbed("sagemaker")


@pytest.fixture(autouse=True)
def _serialised_moto() -> Iterator[None]:
    with serialized_moto():
        yield


@pytest.fixture
def fake_k8s() -> Iterator[FakeKubernetes]:
    """A fake Kubernetes API server per test (tests/control/backends/eks/fake_k8s.py)."""
    yield from run_fake(FakeKubernetes())


@pytest.fixture
def k8s_client(fake_k8s: FakeKubernetes) -> KubernetesClient:
    """A client for ``fake_k8s`` that never sleeps between retries."""
    return KubernetesClient(fake_k8s.url, timeout=5, max_attempts=3, backoff=0, sleep=lambda _: None)
