"""Given the scheduling benchmark on a tiny configuration, when it runs, then it prints one
``scheduler=<name> workload=<w> mean_wait_s=<x> p95_wait_s=<x> idle_pct=<x> goodput=<x>
priority_changes_per_job_hour=<x> fairness=<x>`` line per scheduler and workload (each seed, then the seeds' mean under the
workload's own name), a goal line per (native, layered) pair, and its JSON file holds the same schedulers. (Speed is the benchmark's business, never asserted.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from bench.sim_bench import main

from osprey.simulate import LAYERED_PAIRS, SCHEDULERS, make_scheduler

LINE = re.compile(
    r"scheduler=(\S+) workload=(\S+) mean_wait_s=\d+\.\d p95_wait_s=\d+\.\d idle_pct=\d+\.\d\d goodput=\d\.\d{4}"
    r" priority_changes_per_job_hour=\d+\.\d\d fairness=[01]\.\d{4} makespan_s=\d+\.\d"
)
GOAL = re.compile(r"goal=\S+ pair=\S+->\S+\+osprey workload=\S+ (met|MISSED) \(.+\)")


def test_benchmark_prints_one_line_per_scheduler_and_workload(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "results.json"
    argv = ["--no-trace", "--llm-jobs", "20", "--llm-gpus", "64", "--seeds", "0", "1", "--json", str(out)]
    assert main([*argv, "--family-seeds", "none"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    results = [LINE.fullmatch(line) for line in lines if line.startswith("scheduler=")]
    assert all(results), lines
    pairs = [(m.group(2), m.group(1)) for m in results if m]
    expected = []
    for load in ("llm-load1.0", "llm-load1.3"):
        for scheduler in SCHEDULERS:
            expected += [(f"{load}-s0", scheduler), (f"{load}-s1", scheduler), (load, scheduler)]
    expected += [("seed", scheduler) for scheduler in SCHEDULERS]
    assert pairs == expected
    goals = [line for line in lines if line.startswith("goal=")]
    assert goals
    assert all(GOAL.fullmatch(line) for line in goals), goals
    # Six goals per pair on each LLM load, one (Kueue only) on the seed's case.
    assert len(goals) == 2 * 6 * len(LAYERED_PAIRS) + 1
    assert re.fullmatch(r"total_seconds=\d+\.\d", lines[-1])
    saved = json.loads(out.read_text())
    assert [r["scheduler"] for r in saved["seed"]] == list(SCHEDULERS)
    assert {(m["workload"], m["scheduler"]) for m in saved["means"]} >= {("llm-load1.0", "kueue+osprey")}
    assert all("fairness" in m for m in saved["means"])
    assert all(set(r["teams"]) == {"team-a", "team-b", "team-c"} for r in saved["seed"])


def test_a_cluster_too_small_for_the_gangs_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--llm-gpus", "4"])
    assert exit_info.value.code == 2


def test_a_pool_of_processes_prints_exactly_what_one_process_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["--no-trace", "--llm-jobs", "12", "--llm-gpus", "64", "--seeds", "0", "1", "--llm-loads", "1.3"]
    argv += ["--family-seeds", "1004,1000", "--family-jobs", "8"]
    outputs = []
    for processes in ("1", "2"):
        out = tmp_path / f"p{processes}.json"
        assert main([*argv, "--processes", processes, "--json", str(out)]) == 0
        printed = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("total_")]
        outputs.append((printed, out.read_text()))
    assert outputs[0] == outputs[1]


def test_the_policy_option_reaches_every_layered_scheduler(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.sim_bench as bench  # noqa: PLC0415 - the module whose scheduler factory is watched

    made: list[tuple[str, str | None]] = []

    def spy(name: str, **kwargs: Any) -> Any:
        policy = kwargs.get("policy")
        made.append((name, None if policy is None else policy.metadata.name))
        return make_scheduler(name, **kwargs)

    monkeypatch.setattr(bench, "make_scheduler", spy)
    policy = Path(__file__).parents[2] / "policies" / "training-policy.yaml"
    argv = ["--no-trace", "--llm-jobs", "8", "--llm-gpus", "64", "--seeds", "0", "--llm-loads", "1.0"]
    argv += ["--family-seeds", "none"]
    assert main([*argv, "--processes", "1", "--policy", str(policy)]) == 0
    capsys.readouterr()
    layered = {name: policy_name for name, policy_name in made if name.endswith("+osprey")}
    assert layered == dict.fromkeys((b for _, b in LAYERED_PAIRS), "training-policy")


FAMILY = re.compile(
    r"family pair=(\S+)->(\S+) goal=(\S+) met=(\d+)/(\d+) worst=family-\d+ .+; needs \d+/\d+: (met|MISSED)"
)


def test_the_family_draws_run_every_pair_and_the_oracle_and_give_one_line_per_pair_and_goal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Given two family draws, shrunk to 10 jobs each, beside a tiny LLM workload.
    out = tmp_path / "family.json"
    argv = ["--no-trace", "--llm-jobs", "4", "--llm-gpus", "64", "--seeds", "0", "--llm-loads", "1.0"]
    argv += [
        "--family-seeds",
        "1003-1004",
        "--family-jobs",
        "10",
        "--json",
        str(out),
        "--plot",
        str(tmp_path),
    ]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    runs = [m for line in lines if (m := LINE.fullmatch(line))]
    family_runs = [(m.group(2), m.group(1)) for m in runs if m.group(2).startswith("family-")]
    # Then each draw ran every pair's native and layered scheduler and the oracle(s).
    oracles = [name for name in ("oracle", "oracle-backfill") if name in SCHEDULERS]
    per_draw = [name for pair in LAYERED_PAIRS for name in pair] + oracles
    assert family_runs == [(f"family-{seed}", name) for seed in (1003, 1004) for name in per_draw]
    # And one line per pair and family goal, each counting both draws.
    family = [FAMILY.fullmatch(line) for line in lines if line.startswith("family ")]
    assert all(family), lines
    assert [(m.group(1), m.group(2), m.group(3)) for m in family if m] == [
        (native, layered, goal)
        for native, layered in LAYERED_PAIRS
        for goal in ("goodput", "idle", "wait-gap", "p95", "fairness", "changes")
    ]
    assert {m.group(5) for m in family if m} == {"2"}
    saved = json.loads(out.read_text())
    assert [r["scheduler"] for r in saved["family-1003"]] == per_draw
    assert len(saved["family_goals"]) == 6 * len(LAYERED_PAIRS)
    # And the scatter of wait change against goodput change, one point per draw and pair.
    assert (tmp_path / "family-wait-vs-goodput.png").read_bytes()[:4] == b"\x89PNG"


def test_family_seeds_take_ranges_lists_or_none_and_anything_else_is_a_usage_error() -> None:
    from bench.family_goals import family_seeds  # noqa: PLC0415 - the parser the option uses

    assert family_seeds("1000-1003") == [1000, 1001, 1002, 1003]
    assert family_seeds("7, 3-4,7") == [7, 3, 4]
    assert family_seeds("none") == []
    for bad in ("x", "5-3", "1-", "-2", ""):
        with pytest.raises(SystemExit) as exit_info:
            main(["--family-seeds", bad])
        assert exit_info.value.code == 2, bad
