"""Given the scheduling benchmark on a tiny configuration, when it runs, then it prints one
``scheduler=<name> workload=<w> mean_wait_s=<x> p95_wait_s=<x> idle_pct=<x> goodput=<x>
priority_changes_per_job_hour=<x> fairness=<x>`` line per scheduler and workload (each seed, then the seeds' mean under the
workload's own name), a goal line per (native, layered) pair, and its JSON file holds the same schedulers. (Speed is the benchmark's business, never asserted.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bench.sim_bench import main

from osprey.simulate import LAYERED_PAIRS, SCHEDULERS

LINE = re.compile(
    r"scheduler=(\S+) workload=(\S+) mean_wait_s=\d+\.\d p95_wait_s=\d+\.\d idle_pct=\d+\.\d\d goodput=\d\.\d{4}"
    r" priority_changes_per_job_hour=\d+\.\d\d fairness=[01]\.\d{4}"
)
GOAL = re.compile(r"goal=\S+ pair=\S+->\S+\+osprey workload=\S+ (met|MISSED) \(.+\)")


def test_benchmark_prints_one_line_per_scheduler_and_workload(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "results.json"
    argv = ["--no-trace", "--llm-jobs", "20", "--llm-gpus", "64", "--seeds", "0", "1", "--json", str(out)]
    assert main(argv) == 0
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
