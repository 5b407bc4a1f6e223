"""Given a derived shard whose job is not on its backend yet, when the apply Lambda runs after the Map state,
then it writes the priority, records it as applied, answers the state machine and prints its metrics as EMF;
a second invocation with the same shard output has nothing left to do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from osprey_control.backends import DERIVED_PRIORITY_TAG
from osprey_control.policy_store import PolicySource
from osprey_control.registry import Backend, JobKey
from osprey_control.steps.derive import derive_within
from osprey_handlers import apply as apply_handler
from tests.control.steps.cycle.conftest import NOW
from tests.control.steps.cycle.test_apply_step import sagemaker_job
from tests.lambda_context import lambda_context


@pytest.fixture
def handler_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OSPREY_TABLE_NAME", "osprey-jobs")
    monkeypatch.setenv("OSPREY_REGISTRY_SHARDS", "1")
    apply_handler._components.cache_clear()
    yield
    apply_handler._components.cache_clear()  # its clients belong to this test's moto context


def test_apply_handler_writes_records_and_reports(
    aws: dict[str, Any], handler_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    import boto3  # noqa: PLC0415 - inside the fixture's moto context

    # Given a SageMaker job the derive step moved to 60
    arn = sagemaker_job(aws, "llama-train")
    shard = derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    ).report.to_dict()

    # When the apply Lambda runs with the Map state's output
    answer = apply_handler.handler({"shards": [shard]}, lambda_context("osprey-apply"))

    # Then the job is tagged, recorded as applied, and the answer and the metrics say so
    assert answer == {"applied": 1, "skipped": 0, "failed": 0, "failures": [], "writes": 1}
    tags = boto3.client("sagemaker", region_name="us-east-1").list_tags(ResourceArn=arn)["Tags"]
    assert {t["Key"]: t["Value"] for t in tags}[DERIVED_PRIORITY_TAG] == "60"
    record = aws["registry"].get(JobKey(Backend.SAGEMAKER, "llama-train"))
    assert (record.derived_priority, record.applied_priority) == (60, 60)
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    counts = {name: r[name] for r in emf for name in ("PrioritiesApplied", "ApplyFailures") if name in r}
    assert counts == {"PrioritiesApplied": [1.0], "ApplyFailures": [0.0]}

    # And replaying the same shard output (a Step Functions retry) writes nothing
    again = apply_handler.handler({"shards": [shard]}, lambda_context("osprey-apply"))
    assert again == {"applied": 0, "skipped": 0, "failed": 0, "failures": [], "writes": 0}


def test_apply_handler_writes_nothing_to_the_backend_when_the_lease_is_about_to_expire(
    aws: dict[str, Any], handler_env: None
) -> None:
    import time  # noqa: PLC0415

    import boto3  # noqa: PLC0415 - inside the fixture's moto context

    from osprey_control.registry import CycleLease  # noqa: PLC0415

    # Given a SageMaker job the derive step moved to 60, and an execution holding the lease, whose Lambda has
    # 300 s left but whose lease expires in 20 s (the margin is 10 s: less than a job's 48 s bound)
    arn = sagemaker_job(aws, "llama-train")
    shard = derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    ).report.to_dict()
    held = CycleLease("osprey-jobs", aws["registry"].client).acquire("cycle", ttl_seconds=300)
    event = {"shards": [shard], "token": held.token, "expiresAt": int(time.time()) + 20}

    # When the apply Lambda runs
    answer = apply_handler.handler(event, lambda_context("osprey-apply"))

    # Then it wrote nothing to SageMaker, and the job waits, pending, for a cycle with time
    assert answer["writes"] == 0
    assert answer["deferred"] == 1
    assert "fenceLost" not in answer
    tags = boto3.client("sagemaker", region_name="us-east-1").list_tags(ResourceArn=arn)["Tags"]
    assert DERIVED_PRIORITY_TAG not in {t["Key"] for t in tags}
    record = aws["registry"].get(JobKey(Backend.SAGEMAKER, "llama-train"))
    assert record.apply_pending()
