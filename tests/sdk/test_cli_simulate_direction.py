"""Given a simulation of each scheduler natively and with Osprey layered on it, when the user reads the table,
then every column says which direction is better and every cell where Osprey does worse is marked and
listed, decided by that direction (a lower wait is a win, a lower goodput a loss)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import yaml
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.cli.simulate import losses
from osprey.simulate import DEFAULT_POLICY, Result

runner = CliRunner()


def _unguarded(tmp_path: Path) -> str:
    """The default policy with the guard off: Osprey's own order, which loses somewhere on the seed case (the
    guard, on by default, stands down where it would)."""
    document = yaml.safe_load(DEFAULT_POLICY.read_text())
    document["spec"]["guard"] = {"enabled": False}
    path = tmp_path / "unguarded.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def _results(policy: str) -> dict[str, Result]:
    """The seed workload's results, as `osprey simulate --json` prints them."""
    result = runner.invoke(
        app,
        [
            "simulate",
            "--workload",
            "seed",
            "--schedulers",
            "kueue,kueue+osprey",
            "--policy",
            policy,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    fields = set(Result.__dataclass_fields__)
    return {row["scheduler"]: Result(**{k: v for k, v in row.items() if k in fields}) for row in rows}


def test_each_column_says_which_direction_is_better_and_marks_where_osprey_loses(tmp_path: Path) -> None:
    # When the user runs the seed workload on Kueue with and without Osprey (its own order, unguarded)
    policy = _unguarded(tmp_path)
    result = runner.invoke(
        app, ["simulate", "--workload", "seed", "--schedulers", "kueue,kueue+osprey", "--policy", policy]
    )
    assert result.exit_code == 0, result.output
    results = _results(policy)
    worse = losses(results["kueue+osprey"], results["kueue"])

    # Then the headers carry ↓ for costs (makespan among them) and ↑ for goodput, and a legend says so
    for header in (
        "mean wait (min) ↓",
        "p95 wait (min) ↓",
        "mean JCT (h) ↓",
        "idle % ↓",
        "goodput ↑",
        "makespan (h) ↓",
        "preempt ↓",
    ):
        assert header in result.stdout
    assert "↓ lower is better, ↑ higher is better" in result.stdout
    # ... and the losses computed from the numbers are the ones listed under the table, each cell marked
    assert worse  # this workload has some (docs/scheduling.md: goals met or missed)
    assert f"where Osprey loses: kueue+osprey against kueue on {', '.join(worse)}" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.strip().startswith("kueue+osprey"))
    assert row.count("✗") == len(worse)


def test_direction_decides_a_loss(tmp_path: Path) -> None:
    native = _results(_unguarded(tmp_path))["kueue"]
    # A shorter wait and a higher goodput are wins; a longer wait and a lower goodput are losses
    better = replace(native, mean_wait_s=native.mean_wait_s * 0.5, goodput=native.goodput * 1.2)
    assert losses(better, native) == []
    poorer = replace(native, mean_wait_s=native.mean_wait_s * 2, goodput=native.goodput * 0.8)
    assert losses(poorer, native) == ["mean wait (min)", "goodput"]
    # ... and a difference within 0.5% is noise
    assert losses(replace(native, idle_pct=native.idle_pct * 1.004), native) == []
