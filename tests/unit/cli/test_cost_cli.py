"""Given a synthesized template (here a small one with the same shape), when a user runs `osprey cost`, then
they get the month per line item as a table or as the documented JSON, and a bad flag exits 1 naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from tests.unit.cost.tiny_template import evaluate_arithmetic, tiny_template

runner = CliRunner()
FLEET = ["--nodes", "64", "--gpus-per-node", "8", "--jobs", "20", "--cycle", "60"]


@pytest.fixture
def template(tmp_path: Path) -> Path:
    path = tmp_path / "Osprey.template.json"
    path.write_text(json.dumps(tiny_template()))
    return path


def test_json_has_the_documented_shape_and_adds_up(template: Path) -> None:
    # When
    result = runner.invoke(app, ["cost", *FLEET, "--template", str(template), "--json"])
    # Then
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"monthly_usd", "lines"}
    assert all(set(line) == {"item", "monthly_usd", "arithmetic"} for line in data["lines"])
    assert data["monthly_usd"] == pytest.approx(sum(line["monthly_usd"] for line in data["lines"]), abs=0.005)
    for line in data["lines"]:
        value, shown = evaluate_arithmetic(line["arithmetic"])
        assert round(value, 2) == pytest.approx(line["monthly_usd"], abs=0.005)
        assert shown == line["monthly_usd"]
    assert not any(line["item"].startswith("Fleet:") for line in data["lines"])


def test_include_agent_adds_the_fleet_lines_to_the_total(template: Path) -> None:
    base = json.loads(runner.invoke(app, ["cost", *FLEET, "--template", str(template), "--json"]).stdout)
    result = runner.invoke(app, ["cost", *FLEET, "--template", str(template), "--json", "--include-agent"])
    data = json.loads(result.stdout)
    fleet = [line["monthly_usd"] for line in data["lines"] if line["item"].startswith("Fleet:")]
    assert fleet == [76.80, 27.65]
    assert data["monthly_usd"] == pytest.approx(base["monthly_usd"] + sum(fleet), abs=0.01)


def test_the_table_names_every_line_and_the_price_date(template: Path) -> None:
    result = runner.invoke(app, ["cost", *FLEET, "--template", str(template)])
    assert result.exit_code == 0, result.output
    for item in ("GetMetricData", "Step Functions", "DynamoDB", "total", "Not in the total", "2026-12-03"):
        assert item in result.stdout


@pytest.mark.parametrize(
    ("flag", "value", "allowed"),
    [
        ("--nodes", "0", "1..1,000,000"),
        ("--nodes", "many", "whole number"),
        ("--gpus-per-node", "-1", "1..64"),
        ("--jobs", "2.5", "whole number"),
        ("--cycle", "5", "10..86,400"),
        ("--cycle", "86401", "10..86,400"),
        ("--cycle", "soon", "10..86,400"),
    ],
)
def test_a_bad_flag_exits_2_naming_it(template: Path, flag: str, value: str, allowed: str) -> None:
    # Given the fleet flags with one bad value
    args = list(FLEET)
    args[args.index(flag) + 1] = value
    # When
    result = runner.invoke(app, ["cost", *args, "--template", str(template)])
    # Then a usage error (docs/cli.md, Exit codes)
    assert result.exit_code == 2
    assert f"error: {flag}:" in result.stderr
    assert allowed in result.stderr
    assert "Traceback" not in result.output


def test_an_unreadable_template_exits_1_naming_the_flag(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["cost", *FLEET, "--template", str(tmp_path / "none.json")])
    assert missing.exit_code == 2  # a file that does not exist: a usage error, as click reports it
    assert "'--template'" in missing.stderr
    assert "does not exist" in missing.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"Resources": {}}))
    wrong = runner.invoke(app, ["cost", *FLEET, "--template", str(other)])
    assert wrong.exit_code == 1
    assert "error: --template:" in wrong.stderr
    assert "AcquireLease" in wrong.stderr


def test_an_unreadable_agent_config_exits_1_naming_the_flag(template: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["cost", *FLEET, "--template", str(template), "--agent-config", str(tmp_path / "none.json")]
    )
    assert result.exit_code == 2
    assert "'--agent-config'" in result.stderr


@pytest.mark.parametrize(
    ("flag", "value", "allowed"),
    [
        ("--policy", "no-such-policy", "default-policy"),
        ("--replanned-jobs", "-2", "0..1,000,000"),
        ("--replanned-jobs", "500", "0.."),  # more than the fleet's running jobs
    ],
)
def test_a_bad_policy_or_replanned_count_exits_2_naming_it(
    template: Path, flag: str, value: str, allowed: str
) -> None:
    result = runner.invoke(app, ["cost", *FLEET, flag, value, "--template", str(template)])
    assert result.exit_code == 2
    assert f"error: {flag}:" in result.stderr
    assert allowed in result.stderr
    assert "Traceback" not in result.output


def test_the_policy_decides_the_series_and_replanned_jobs_add_their_step_time(template: Path) -> None:
    def month(*extra: str) -> dict[str, float]:
        result = runner.invoke(app, ["cost", *FLEET, "--template", str(template), "--json", *extra])
        assert result.exit_code == 0, result.output
        return {line["item"]: line["monthly_usd"] for line in json.loads(result.stdout)["lines"]}

    default, training, replanned = (
        month(),
        month("--policy", "training-policy"),
        month("--replanned-jobs", "4"),
    )
    reads = next(item for item in default if item.startswith("CloudWatch GetMetricData"))
    # training-policy reads two agent series per node where default-policy reads one
    assert training[reads] > default[reads]
    custom = "CloudWatch custom metrics (runtime and control plane EMF)"
    assert replanned[custom] == pytest.approx(default[custom] + 4 * 0.30)
