"""Given decisions recorded by guarded cycles (written through the registry's own writer, moto, with the notes the
collect step's guard leaves in ``inputs.notes``), when `osprey report` reads them, then per backend and ISO week
it counts each pool's cycle once, how many of those stood down to the native order, and which order was chosen
how often; the table says it in one cell.

Times (UTC; ISO week 2026-W49 starts Monday 2026-11-30), EKS cluster gpu with jobs x and y, cluster other with z:
  Mon 01:00  gpu: policy (x and y decided)        Mon 02:00  gpu: native (x and y), other: native (z)
  Mon 03:00  gpu: policy-no-yield (only x decided: y's priority did not move)
  Mon 2026-12-07 01:00 (W50)  gpu: native (x)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.report import build_report, read_snapshot
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobKey, JobStatus, format_time
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from osprey_control.wiring import GUARD_CYCLE_NOTE, GUARD_ORDER_NOTE

REGION = "us-east-1"
MON = datetime(2026, 11, 30, tzinfo=UTC)
NOW = datetime(2026, 12, 8, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _observe(registry: JobRegistry, name: str, cluster: str) -> JobKey:
    observation = JobObservation(
        backend=Backend.EKS,
        native_id=f"{cluster}/ml/{name}/uid-{name}",
        name=name,
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=JobStatus.PENDING,
        event_time=MON,
        submitted_at=MON,
        cluster=cluster,
        requested_gpus=8,
    )
    registry.apply_observation(observation)
    return observation.key


def _decide(registry: JobRegistry, key: JobKey, cycle: datetime, order: str, priority: int) -> None:
    """A decision as the derive step writes it from a guarded collection: the verdict's notes in its inputs."""
    record = registry.get(key)
    assert record is not None
    notes = {"guard": f"verdict of {order}", GUARD_ORDER_NOTE: order, GUARD_CYCLE_NOTE: format_time(cycle)}
    decision: dict[str, object] = {
        "priority": priority,
        "previous": record.derived_priority or 50,
        "target": float(priority),
        "base": float(priority),
        "reason": "guarded" if order == "native" else "derived",
        "rules": [],
        "inputs": {"nodes": {}, "job": {}, "notes": notes},
    }
    registry.record_decision(key, decision, priority, record.version, cycle + timedelta(seconds=20))


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[JobRegistry]:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        registry = JobRegistry("osprey-jobs", boto3.client("dynamodb", region_name=REGION), shards=2)
        registry.create_table()
        x, y, z = (
            _observe(registry, "x", "gpu"),
            _observe(registry, "y", "gpu"),
            _observe(registry, "z", "other"),
        )
        _decide(registry, x, MON + HOUR, "policy", 70)
        _decide(registry, y, MON + HOUR, "policy", 30)
        _decide(registry, x, MON + 2 * HOUR, "native", 10)
        _decide(registry, y, MON + 2 * HOUR, "native", 10)
        _decide(registry, z, MON + 2 * HOUR, "native", 10)
        _decide(registry, x, MON + 3 * HOUR, "policy-no-yield", 60)
        _decide(registry, x, MON + timedelta(days=7, hours=1), "native", 10)
        yield registry


def test_each_pools_cycle_counts_once_by_the_order_it_got(registry: JobRegistry) -> None:
    # When the report is computed
    report = build_report(read_snapshot(registry, NOW), MON).to_dict()
    [eks] = report["backends"]
    weeks = {row["week"]: row["guard"] for row in eks["weeks"]}
    # Then W49 has four pool-cycles (gpu at 01:00, 02:00, 03:00; other at 02:00), two of them stood down
    assert weeks["2026-W49"] == {
        "cycles": 4,
        "stood_down": 2,
        "orders": {"native": 2, "policy": 1, "policy-no-yield": 1},
    }
    # And W50 the one cycle recorded then
    assert weeks["2026-W50"] == {"cycles": 1, "stood_down": 1, "orders": {"native": 1}}


def test_the_table_shows_cycles_stood_down_and_the_other_orders(
    registry: JobRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path / "local.json"))
    runner = CliRunner()
    since = MON.date().isoformat()
    result = runner.invoke(app, ["report", "--since", since, "--table", "osprey-jobs"], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert "GUARD DOWN/CYCLES" in result.stdout
    [w49] = [line for line in result.stdout.splitlines() if "2026-W49" in line]
    assert "2/4: policy 1, policy-no-yield 1" in w49
    as_json = json.loads(
        runner.invoke(app, ["report", "--since", since, "--json", "--table", "osprey-jobs"]).stdout
    )
    assert as_json["backends"][0]["weeks"][0]["guard"]["cycles"] == 4
