"""``osprey simulate``: table with ratios, JSON one object per scheduler, plots, errors naming the flag."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.simulate import SCHEDULERS

runner = CliRunner()


def test_json_prints_one_object_per_scheduler() -> None:
    result = runner.invoke(
        app, ["simulate", "--workload", "seed", "--schedulers", "fifo,kueue+osprey", "--json"]
    )
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["scheduler"] for o in objects] == ["fifo", "kueue+osprey"]
    for key in ("workload", "mean_wait_s", "p95_wait_s", "idle_pct", "goodput"):
        assert all(key in o for o in objects), key
    assert objects[1]["priority_changes_per_job_hour"] > 0
    assert objects[0]["priority_changes_per_job_hour"] is None
    assert objects[0]["mean_wait_s"] > objects[1]["mean_wait_s"]


def test_the_table_shows_each_layered_scheduler_against_its_native_one() -> None:
    result = runner.invoke(app, ["simulate", "--workload", "seed", "--schedulers", "kueue,kueue+osprey,fifo"])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "x)" in rows["kueue+osprey"]
    assert "x)" not in rows["fifo"]


def test_plot_writes_the_three_pngs(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "simulate",
            "--workload",
            "seed",
            "--schedulers",
            "kueue,kueue+osprey",
            "--json",
            "--plot",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["seed-queue.png", "seed-utilization.png", "seed-wait-cdf.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in tmp_path.iterdir())


def test_a_bad_option_value_exits_2_naming_the_flag_and_what_is_allowed(tmp_path: Path) -> None:
    cases = {
        (
            "--schedulers",
            "fifo,pbs",
        ): "--schedulers: unknown pbs; allowed: fifo, fairshare, fairshare+osprey, kueue",
        ("--workload", "nope"): "--workload: 'nope' is not one of alibaba, llm, seed",
        ("--gpus", "0"): "--gpus: must be a positive number",
        ("--cycle", "0"): "--cycle: must be between 1 and 86400",
        ("--policy", str(tmp_path / "missing.yaml")): "--policy",
    }
    for args, message in cases.items():
        result = runner.invoke(app, ["simulate", "--workload", "seed", *args])
        assert result.exit_code == 2, args  # a usage error (docs/cli.md, exit codes)
        assert message in result.output, (args, result.output)


def test_a_gang_larger_than_the_cluster_is_an_error_naming_gpus() -> None:
    result = runner.invoke(
        app, ["simulate", "--workload", "llm", "--jobs", "50", "--gpus", "16", "--load", "0.5"]
    )
    assert result.exit_code == 0, result.output  # the generator only draws sizes that fit
    result = runner.invoke(app, ["simulate", "--workload", "seed", "--gpus", "32"])
    assert result.exit_code == 1
    assert "--gpus:" in result.output


def test_a_job_csv_runs_and_its_errors_name_the_flag(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,submit_time_s,num_gpus,duration_s\na,0,8,500\nb,10,16,300\nc,20,8,100\n")
    result = runner.invoke(app, ["simulate", "--workload", str(jobs), "--gpus", "16", "--json"])
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == len(SCHEDULERS)  # one per scheduler
    result = runner.invoke(app, ["simulate", "--workload", str(jobs), "--gpus", "8"])
    assert result.exit_code == 1
    assert "--gpus: job b: 16 GPUs" in result.output
    jobs.write_text("job_id,submit_time_s,num_gpus,duration_s\na,0,x,500\n")
    result = runner.invoke(app, ["simulate", "--workload", str(jobs)])
    assert result.exit_code == 1
    assert "--workload:" in result.output
    assert "line 2: num_gpus: 'x' is not an integer" in result.output


def test_fairness_and_teams_are_in_the_json_and_the_table() -> None:
    result = runner.invoke(
        app, ["simulate", "--workload", "seed", "--schedulers", "kueue,kueue+osprey", "--json"]
    )
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    for o in objects:
        assert 0.0 < o["fairness"] <= 1.0
        assert set(o["teams"]) == {"team-a", "team-b", "team-c"}
        assert all({"mean_wait_s", "gpu_hours"} <= set(team) for team in o["teams"].values())
    table = runner.invoke(app, ["simulate", "--workload", "seed", "--schedulers", "kueue,kueue+osprey"])
    assert table.exit_code == 0, table.output
    assert "fairness ↑" in table.stdout
    row = next(line for line in table.stdout.splitlines() if line.strip().startswith("kueue+osprey"))
    assert f"{objects[1]['fairness']:.3f} (" in row
