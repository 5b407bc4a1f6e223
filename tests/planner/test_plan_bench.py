"""Given the planner benchmark, when run on two small sizes, then it prints one ``gpus=<N> candidates=<C>
seconds=<S>`` line per size, each followed by its same-run exhaustive baseline agreeing on the best plan.
(Speed itself is measured by the benchmark, never asserted here.)"""

from __future__ import annotations

import re

import pytest
from bench.plan_bench import main


def test_benchmark_prints_one_line_per_size_with_its_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--gpus", "64,512", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[1].startswith("options searched: recompute x sequence parallelism")
    assert re.fullmatch(r"baseline: one plan evaluation = \d+\.\d us", lines[2])
    rows = [line for line in lines if line.startswith("gpus=")]
    assert [re.fullmatch(r"gpus=(\d+) candidates=\d+ seconds=\d+\.\d{4}", row).group(1) for row in rows] == [  # type: ignore[union-attr]
        "64",
        "512",
    ]
    baselines = [line for line in lines if line.startswith("  baseline exhaustive:")]
    assert len(baselines) == 2
    assert all("same_best=yes" in line and re.search(r"ratio=\d+\.\dx", line) for line in baselines)


def test_bad_gpu_list_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--gpus", "60"])
    assert exit_info.value.code == 2
