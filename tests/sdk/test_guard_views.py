"""Given a job whose pool's guard stood down to the native order (a decision recorded as the cycle records it:
the collect step's guard, the engine, the registry; moto), when a user runs `osprey explain` and `osprey
history`, then the guard's verdict comes first in bold-faced words they can act on (the order chosen, why, and
each candidate's predicted wait and goodput), the reason says what ``guarded`` means, and the notes the control
plane keeps for itself are not shown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.derivation import derive, summarize_inputs
from osprey_control.metrics import add_guard
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.metrics.guard_pools import NATIVE, Policies, collected, compiled, fragmenting
from tests.sdk.conftest import REGION

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path / "local.json"))
    monkeypatch.delenv("OSPREY_TABLE_NAME", raising=False)


@pytest.fixture
def guarded() -> Iterator[str]:
    """/osprey/config and a registry whose fragmenting pool (guard_pools) was just derived with the guard
    standing down; yields the verdict's text."""
    now = datetime.now(UTC)
    records = fragmenting(now=now)
    result = collected(records, now)
    policies = Policies(compiled())
    [pool] = add_guard(records, result, policies, now=now)
    assert pool.verdict is not None
    with mock_aws():
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name="/osprey/config",
            Type="String",
            Value=json.dumps({"stackName": "Osprey", "tableName": "osprey-jobs", "registryShards": 1}),
        )
        registry = JobRegistry("osprey-jobs", boto3.client("dynamodb", region_name=REGION), shards=1)
        registry.create_table()
        for record in records:
            registry.update(record.key, lambda _, record=record: record)  # type: ignore[misc]
            metrics = result.metrics[record.key]
            decision = derive(policies.get("shortest"), metrics, None)
            stored = registry.get(record.key)
            assert stored is not None
            explained = {**decision.to_dict(), "inputs": summarize_inputs(metrics)}
            registry.record_decision(record.key, explained, decision.priority, stored.version, now)
        yield pool.verdict.describe()


def test_explain_puts_the_guards_verdict_first_and_says_what_guarded_means(guarded: str) -> None:
    # When the user explains a job of the pool
    result = runner.invoke(app, ["explain", "p-short"], terminal_width=400)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # Then the guard's verdict is a line of its own, before the rules
    verdict = next(index for index, line in enumerate(lines) if line.startswith("guard: "))
    assert lines[verdict] == f"guard: {guarded}"
    assert "stood down to the native order" in lines[verdict]
    assert "policy: wait" in lines[verdict]
    assert "goodput" in lines[verdict]
    rules = next(index for index, line in enumerate(lines) if "remaining_time" in line)
    assert verdict < rules
    # And the damping line says the priority is the native one, and why the rules did not set it
    assert f"priority {NATIVE} (base " in result.stdout
    assert "guarded: the pool keeps its backend's native order this cycle" in result.stdout
    # And the notes kept for the next cycle (the order, the cycle's instant) are not shown
    assert "guard-order" not in result.stdout
    assert "guard-cycle" not in result.stdout
    assert "guard-signature" not in result.stdout


def test_history_shows_the_guarded_decision_with_its_verdict(guarded: str) -> None:
    result = runner.invoke(app, ["history", "p-short"], terminal_width=1000)
    assert result.exit_code == 0, result.output
    assert "guarded" in result.stdout
    assert "guard: stood down to the native order" in result.stdout
    assert "guard-order" not in result.stdout
    as_json = json.loads(runner.invoke(app, ["history", "p-short", "--json"]).stdout)
    [derived] = [event for event in as_json["events"] if event["event"] == "derived"]
    assert (derived["reason"], derived["priority"]) == ("guarded", NATIVE)
