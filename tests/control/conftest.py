"""Fixtures for control-plane tests: fake credentials so no test can reach a real AWS account, and moto's
DynamoDB serialised (it is not thread-safe; the derive step writes from threads, see ``moto_threads``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.control.moto_threads import serialised_moto_dynamodb

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


@pytest.fixture(autouse=True)
def _serialised_moto_dynamodb() -> Iterator[None]:
    with serialised_moto_dynamodb():
        yield
