"""Given the cycle benchmark on a small fleet, then it makes ceil(S/500) GetMetricData calls and prints its
machine-readable last line (its timings are the benchmark's business, not asserted here)."""

from __future__ import annotations

import re

import pytest
from bench.cycle_bench import main


def test_cycle_benchmark_runs_and_reports(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--jobs", "6", "--nodes", "14", "--skip-imports"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    match = re.fullmatch(r"jobs=6 series=(\d+) getmetricdata_calls=(\d+) writes=(\d+) seconds=[\d.]+", last)
    assert match is not None, last
    series, calls, writes = (int(group) for group in match.groups())
    assert series == 14 * 5  # four CWAgent series and the runtime latency per instance
    assert calls == 1
    assert writes >= 6  # one conditional decision write per job
