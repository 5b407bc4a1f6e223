"""Given a policy and a metrics file, when a user runs `osprey derive`, then they get the engine's decision,
as JSON or as an sprio-style table, and bad input exits non-zero with the field path."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from tests.unit.policy.seeds import SEED_POLICY, SEED_WITH_CUSTOM

runner = CliRunner()
NODE = {
    "node_id": "i-1",
    "gpu_utilization": 95,
    "memory_bandwidth_utilization": 70,
    "node_interconnect_latency": 120,
}
SEED_BASE = 0.6 * 95.5 + 0.3 * (5 + 95 * math.log10(7.3)) + 0.1 * 47.06


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {
        "seed": tmp_path / "seed.yaml",
        "custom": tmp_path / "custom.yaml",
        "metrics": tmp_path / "metrics.json",
    }
    paths["seed"].write_text(SEED_POLICY)
    paths["custom"].write_text(SEED_WITH_CUSTOM)
    paths["metrics"].write_text(json.dumps({"job": {"id": "j1", "queue_wait": 0}, "nodes": [NODE]}))
    return paths


def _json(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["derive", *args, "--json"])
    assert result.exit_code == 0, result.output
    document: dict[str, object] = json.loads(result.stdout)
    return document


def test_json_decision(files: dict[str, Path]) -> None:
    document = _json("--policy", str(files["seed"]), "--metrics", str(files["metrics"]), "--current", "85")
    assert document["priority"] == 88
    assert document["previous"] == 85
    assert document["reason"] == "derived"
    assert document["base"] == pytest.approx(SEED_BASE)
    assert document["target"] == pytest.approx(SEED_BASE)
    rules = document["rules"]
    assert isinstance(rules, list)
    assert [rule["metric"] for rule in rules] == [
        "gpu_utilization",
        "memory_bandwidth_utilization",
        "node_interconnect_latency",
    ]
    assert rules[0] == {
        "index": 0,
        "kind": "builtin",
        "metric": "gpu_utilization",
        "value": 95.0,
        "normalized": 0.95,
        "score": 0.95,
        "priority": 95.5,
        "weight": 0.6,
        "used": True,
        "outcome": "used",
    }


def test_default_current_is_the_initial_priority(files: dict[str, Path]) -> None:
    document = _json("--policy", str(files["seed"]), "--metrics", str(files["metrics"]))
    assert (document["previous"], document["priority"], document["reason"]) == (50, 60, "damped")


def test_custom_rules_use_fallback_value_or_fail(files: dict[str, Path]) -> None:
    args = ["--policy", str(files["custom"]), "--metrics", str(files["metrics"]), "--current", "50"]
    fallback = _json(*args)
    assert fallback["rules"][3]["outcome"] == "fallback:not-invoked"  # type: ignore[index]
    assert fallback["priority"] == 50  # the stage's fallback 50 replaces the base
    answered = _json(*args, "--custom", "3=57")
    assert answered["rules"][3]["outcome"] == "answered"  # type: ignore[index]
    assert (answered["target"], answered["priority"]) == (57, 57)
    failed = _json(*args, "--custom", "3=fail")
    assert failed["rules"][3]["outcome"] == "fallback:error"  # type: ignore[index]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("1=20", "not a custom rule"),
        ("9=20", "not a custom rule"),
        ("3", "INDEX=VALUE"),
        ("3=abc", "finite number"),
        ("3=nan", "finite number"),
    ],
)
def test_bad_custom_option_is_a_usage_error(files: dict[str, Path], option: str, message: str) -> None:
    result = runner.invoke(
        app,
        ["derive", "--policy", str(files["custom"]), "--metrics", str(files["metrics"]), "--custom", option],
    )
    assert result.exit_code == 2
    assert message in result.stderr


def test_bad_metrics_file_exits_one_with_field_path(files: dict[str, Path], tmp_path: Path) -> None:
    metrics = tmp_path / "bad.json"
    metrics.write_text(json.dumps({"nodes": [{"gpu_utilization": 1}, {"gpu_utilization": "high"}]}))
    result = runner.invoke(app, ["derive", "--policy", str(files["seed"]), "--metrics", str(metrics)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{metrics}: nodes[1].gpu_utilization: must be a number")


def test_bad_policy_file_exits_one_with_field_path(files: dict[str, Path], tmp_path: Path) -> None:
    policy = tmp_path / "bad.yaml"
    policy.write_text(SEED_POLICY.replace("minPriority: 10", "minPriority: 110"))
    result = runner.invoke(app, ["derive", "--policy", str(policy), "--metrics", str(files["metrics"])])
    assert result.exit_code == 1
    assert f"{policy}: spec.derivationRules[0].minPriority:" in result.stderr


def test_current_out_of_range_is_a_usage_error(files: dict[str, Path]) -> None:
    result = runner.invoke(
        app,
        ["derive", "--policy", str(files["seed"]), "--metrics", str(files["metrics"]), "--current", "101"],
    )
    assert result.exit_code == 2


def test_file_with_several_policies_needs_a_name(files: dict[str, Path], tmp_path: Path) -> None:
    multi = tmp_path / "multi.yaml"
    multi.write_text(SEED_POLICY + "---\n" + SEED_POLICY.replace("name: training-policy", "name: other"))
    base = ["derive", "--policy", str(multi), "--metrics", str(files["metrics"])]
    assert runner.invoke(app, base).exit_code == 2
    result = runner.invoke(app, [*base, "--name", "other", "--json"])
    assert result.exit_code == 0


def test_table_output_reads_like_sprio(files: dict[str, Path]) -> None:
    result = runner.invoke(
        app, ["derive", "--policy", str(files["custom"]), "--metrics", str(files["metrics"])]
    )
    assert result.exit_code == 0
    for text in (
        "gpu_utilization",
        "95.50",
        "osprey-custom-derivation",
        "stage",
        "fallback:not-invoked",
        "REASON",
    ):
        assert text in result.stdout


def test_job_ids_are_printed_literally_not_as_markup(files: dict[str, Path], tmp_path: Path) -> None:
    metrics = tmp_path / "markup.json"
    metrics.write_text(json.dumps({"job": {"id": "[/oops][red]evil"}, "nodes": [NODE]}))
    result = runner.invoke(app, ["derive", "--policy", str(files["seed"]), "--metrics", str(metrics)])
    assert result.exit_code == 0, result.output
    assert "[/oops][red]evil" in result.stdout


@pytest.mark.parametrize("option", ["²=5", "٣=5"])
def test_non_ascii_digits_are_a_usage_error(files: dict[str, Path], option: str) -> None:
    result = runner.invoke(
        app,
        ["derive", "--policy", str(files["custom"]), "--metrics", str(files["metrics"]), "--custom", option],
    )
    assert result.exit_code == 2


def test_same_custom_rule_twice_is_a_usage_error(files: dict[str, Path]) -> None:
    args = ["derive", "--policy", str(files["custom"]), "--metrics", str(files["metrics"])]
    result = runner.invoke(app, [*args, "--custom", "3=10", "--custom", "3=20"])
    assert result.exit_code == 2
    assert "given twice" in result.stderr


SIGNALS_POLICY = """\
apiVersion: osprey.aws/v1
kind: PriorityDerivationPolicy
metadata: {name: signals-policy}
spec:
  derivationRules:
  - {metric: gpu_utilization, weight: 1, scaling: linear, minPriority: 0, maxPriority: 100}
  - {metric: remaining_time, weight: 2, scaling: inverse, minPriority: 0, maxPriority: 100, range: [0, 36000]}
  - {metric: attained_service, weight: 1, scaling: inverse, minPriority: 0, maxPriority: 100}
  - {metric: requested_gpus, weight: 1, scaling: linear, minPriority: 0, maxPriority: 100, range: [0, 64]}
  maxPriorityChange: 20
"""
QUEUED_JOB = {
    "job": {"id": "queued-1", "remaining_time": 9000, "attained_service": 250, "requested_gpus": 16},
    "nodes": [],
}


@pytest.fixture
def signals(tmp_path: Path) -> dict[str, Path]:
    paths = {"policy": tmp_path / "signals.yaml", "metrics": tmp_path / "queued.json"}
    paths["policy"].write_text(SIGNALS_POLICY)
    paths["metrics"].write_text(json.dumps(QUEUED_JOB))
    return paths


def test_job_level_only_metrics_file_derives_a_queued_job(signals: dict[str, Path]) -> None:
    # Given a queued job whose metrics file holds only job-level signals (no nodes yet)
    # When derived as JSON
    document = _json(
        "--policy", str(signals["policy"]), "--metrics", str(signals["metrics"]), "--current", "50"
    )
    # Then the node rule has no data and each job-level rule is used with the job's raw value
    rules = document["rules"]
    assert isinstance(rules, list)
    assert [(rule["metric"], rule["outcome"], rule["value"]) for rule in rules] == [
        ("gpu_utilization", "no-data", None),
        ("remaining_time", "used", 9000.0),
        ("attained_service", "used", 250.0),
        ("requested_gpus", "used", 16.0),
    ]
    assert [rule["priority"] for rule in rules[1:]] == pytest.approx([75.0, 75.0, 25.0])
    assert document["base"] == pytest.approx((2 * 75 + 75 + 25) / 4)
    assert (document["priority"], document["reason"]) == (63, "derived")


def test_job_level_rules_are_shown_as_used_in_the_table(signals: dict[str, Path]) -> None:
    # Given the same queued job, when derived as a table
    result = runner.invoke(
        app, ["derive", "--policy", str(signals["policy"]), "--metrics", str(signals["metrics"])]
    )
    # Then it exits 0 and each job-level rule's row shows its raw value, score and "used", as queue_wait's does
    assert result.exit_code == 0, result.output
    rows = {line.split()[2]: line.split() for line in result.stdout.splitlines() if " builtin " in line}
    assert rows["remaining_time"][3:5] == ["9000.00", "0.250"]
    assert rows["remaining_time"][-1] == "used"
    assert rows["attained_service"][3] == "250.00"
    assert rows["attained_service"][-1] == "used"
    assert rows["requested_gpus"][3] == "16.00"
    assert rows["requested_gpus"][-1] == "used"
    assert rows["gpu_utilization"][-1] == "no-data"
    assert "queued-1" in result.stdout
    assert "0 node(s)" in result.stdout


def test_bad_job_level_value_exits_one_naming_its_path(signals: dict[str, Path], tmp_path: Path) -> None:
    metrics = tmp_path / "bad.json"
    metrics.write_text(json.dumps({"job": {"id": "j1", "remaining_time": "two hours"}}))
    result = runner.invoke(app, ["derive", "--policy", str(signals["policy"]), "--metrics", str(metrics)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{metrics}: job.remaining_time: must be a number")
