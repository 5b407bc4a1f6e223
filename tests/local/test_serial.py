"""Serialised moto dispatch: concurrent registry transactions (a cycle's shards) no longer corrupt moto."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import boto3
from moto import mock_aws

from osprey.local.serial import is_lambda_invocation, serialized_moto
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.steps.cycle.conftest import register


def _hammer(registry: JobRegistry, keys: list[Any]) -> list[str]:
    errors: list[str] = []

    def work(key: Any) -> None:
        for step in range(15):
            try:
                record = registry.get(key)
                assert record is not None
                registry.record_decision(
                    key, {"priority": 50}, 50 + step % 2, record.version, datetime.now(UTC)
                )
            except Exception as error:
                errors.append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=work, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_concurrent_decisions_on_different_jobs_all_succeed_when_serialised() -> None:
    with mock_aws(), serialized_moto():
        registry = JobRegistry(
            "osprey-jobs", client=boto3.client("dynamodb", region_name="us-east-1"), shards=16
        )
        registry.create_table()
        keys = [register(registry, f"job-{index}", f"i-{index}") for index in range(8)]
        # When eight threads each write fifteen decisions for their own job
        errors = _hammer(registry, keys)
        # Then none fails, and every job holds all fifteen versions
        assert errors == []
        assert {registry.get(key).version for key in keys} == {16}  # type: ignore[union-attr]


def test_only_lambda_invocations_bypass_the_lock() -> None:
    assert is_lambda_invocation(
        "https://lambda.us-east-1.amazonaws.com/2015-03-31/functions/osprey-derive/invocations"
    )
    assert not is_lambda_invocation(
        "https://lambda.us-east-1.amazonaws.com/2015-03-31/functions/osprey-derive"
    )
    assert not is_lambda_invocation("https://dynamodb.us-east-1.amazonaws.com/")
