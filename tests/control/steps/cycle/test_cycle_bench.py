"""Given the cycle benchmark on a small fleet, then its one pass collects, derives and applies: ceil(S/500)
GetMetricData calls, one decision write and one applied-priority write per job, one UpdateSchedulingPolicy for
the fair-share queue, and its machine-readable last line (timings are the benchmark's business, not asserted)."""

from __future__ import annotations

import re

import pytest
from bench.cycle_bench import main


def test_cycle_benchmark_runs_and_reports(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--jobs", "6", "--nodes", "14"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    match = re.fullmatch(
        r"jobs=6 series=(\d+) getmetricdata_calls=(\d+) writes=(\d+) seconds=[\d.]+", lines[-1]
    )
    assert match is not None, lines[-1]
    series, calls, writes = (int(group) for group in match.groups())
    # Only what training-policy reads (collect.needs_from_policies): GPU and memory utilization from the agent
    # per instance and the runtime's interconnect latency per job (its lead host); no progress series, since no
    # rule reads remaining_time.
    assert series == 14 * 2 + 6
    assert calls == 1
    # decisions, applied priorities, their lines in the jobs' history, one UpdateSchedulingPolicy
    assert writes == 6 + 6 + 6 + 1
    assert any(
        line.startswith("apply: applied 6, skipped 0, failed 0; UpdateSchedulingPolicy calls 1")
        for line in lines
    )
