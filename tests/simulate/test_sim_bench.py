"""Given the scheduling benchmark on a tiny configuration, when it runs, then it prints one
``scheduler=<name> workload=<w> mean_wait_s=<x> p95_wait_s=<x> idle_pct=<x> goodput=<x>`` line per scheduler
and workload, and its JSON file holds the same schedulers. (Speed is the benchmark's business, never asserted.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bench.sim_bench import main

from osprey_control.simulate import SCHEDULERS

LINE = re.compile(
    r"scheduler=(\S+) workload=(\S+) mean_wait_s=\d+\.\d p95_wait_s=\d+\.\d idle_pct=\d+\.\d\d goodput=\d\.\d{4}"
)


def test_benchmark_prints_one_line_per_scheduler_and_workload(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "results.json"
    argv = ["--no-trace", "--llm-jobs", "20", "--llm-gpus", "64", "--json", str(out)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    matches = [LINE.fullmatch(line) for line in lines[:-1]]
    assert all(matches), lines
    pairs = [(m.group(2), m.group(1)) for m in matches if m]
    workloads = ["llm", "llm-load1.3", "seed"]
    assert pairs == [(w, s) for w in workloads for s in SCHEDULERS]
    assert re.fullmatch(r"total_seconds=\d+\.\d", lines[-1])
    saved = json.loads(out.read_text())
    assert sorted(saved) == sorted(workloads)
    assert [r["scheduler"] for r in saved["seed"]] == list(SCHEDULERS)


def test_a_cluster_too_small_for_the_gangs_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--llm-gpus", "4"])
    assert exit_info.value.code == 2
