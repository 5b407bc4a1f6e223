"""Given the derivation benchmark, when run on a small fleet, then it agrees with its baseline and prints the
machine-readable last line. (Speed itself is measured by the benchmark, never asserted here.)"""

from __future__ import annotations

import re

import pytest
from bench.derive_bench import main


def test_benchmark_prints_its_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--jobs", "40", "--nodes", "3", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "priorities differing from the baseline: 0" in lines
    assert re.fullmatch(r"rule_evals_per_s=\d+ jobs=40 seconds=\d+\.\d+", lines[-1])
