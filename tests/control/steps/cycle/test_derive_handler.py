"""Given a deployed-like environment, when the derive Lambda is invoked for a shard, then it returns the
shard's changes and prints its metrics as EMF."""

from __future__ import annotations

import json
from typing import Any

import pytest

from osprey_handlers import derive as derive_handler
from tests.control.steps.cycle.conftest import gpu_metrics, register
from tests.lambda_context import lambda_context


def test_handler_runs_one_shard(
    aws: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OSPREY_TABLE_NAME", "osprey-jobs")
    monkeypatch.setenv("OSPREY_REGISTRY_SHARDS", "1")
    derive_handler._settings.cache_clear()
    derive_handler._components.cache_clear()
    register(aws["registry"], "busy-job", "i-0busy")
    gpu_metrics(aws["cloudwatch"], "i-0busy", gpu=97.0, memory_bw=80.0)

    result = derive_handler.handler({"shard": 0}, lambda_context("osprey-derive"))

    assert result["evaluated"] == 1
    assert result["failures"] == []
    assert json.dumps(result)  # the state machine payload is JSON
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert any("JobsEvaluated" in record for record in emf)
    assert all(r["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "/aws/osprey" for r in emf)
