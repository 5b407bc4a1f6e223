"""Given a Kueue pool whose policy order is predicted to idle GPUs, when the cycle's collect Lambda runs through
its real handler (moto DynamoDB, SSM and CloudWatch), then it publishes the guard's EMF per backend: the pool
stood down, one pool guarded, none failed; the state machine's output stays counts only."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from osprey_control.policy import load_policy_text, policy_parameter_value
from osprey_control.registry.dynamodb import JobRegistry
from osprey_handlers import collect as collect_handler
from tests.control.metrics.guard_pools import fragmenting, policy_text
from tests.lambda_context import lambda_context


def test_the_collect_lambda_publishes_the_guards_verdicts(
    aws: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given the fragmenting pool in the registry as of now (the handler reads the clock) and its policy deployed
    registry: JobRegistry = aws["registry"]
    for record in fragmenting(now=datetime.now(UTC)):
        registry.update(record.key, lambda _, record=record: record)  # type: ignore[misc]
    policy = load_policy_text(policy_text(), "shortest.yaml").policies[0].policy
    aws["ssm"].put_parameter(
        Name="/osprey/policies/shortest", Value=policy_parameter_value(policy), Type="String"
    )
    monkeypatch.setenv("OSPREY_TABLE_NAME", "osprey-jobs")
    monkeypatch.setenv("OSPREY_REGISTRY_SHARDS", "1")
    collect_handler._settings.cache_clear()
    collect_handler._components.cache_clear()

    # When the collect Lambda runs for the cycle
    output = collect_handler.handler({"shards": [0], "token": 1}, lambda_context("osprey-collect"))

    # Then its EMF says, for EKS: one pool guarded, stood down, no failure
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    guard = {
        name: record[name]
        for record in records
        for name in ("GuardStoodDown", "GuardEvaluations", "GuardFailures")
        if name in record and record.get("Backend") == "eks"
    }
    assert guard == {"GuardStoodDown": [1.0], "GuardEvaluations": [1.0], "GuardFailures": [0.0]}
    directive = next(r for r in records if "GuardStoodDown" in r)["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "/aws/osprey"
    assert "Backend" in directive["Dimensions"][0]  # with the service Powertools adds to every series
    # And the log has the pool's verdict, with its fields as structured keys
    [verdict] = [record.__dict__ for record in caplog.records if record.getMessage() == "guard verdict"]
    assert (verdict["backend"], verdict["pool"], verdict["chosen"], verdict["stood_down"]) == (
        "eks",
        "gpu",
        "native",
        True,
    )
    # And the state machine still gets counts only
    assert set(output) == {"jobs", "series", "getmetricdata_calls", "stored", "tooLarge"}
