"""Given the real-Slurm benchmark (bench/slurm_bench.py), when it runs a tiny workload, then it prints its
result, ratio and fidelity lines: a smoke test, so a change to what it reads (a native id, a policy) cannot
break it unnoticed. The numbers themselves are the bench's business, never asserted here."""

from __future__ import annotations

import re

import pytest
from bench.slurm_bench import main

from tests.slurm.conftest import require_real_slurm


def test_the_slurm_bench_prints_results_ratios_and_fidelity(capsys: pytest.CaptureFixture[str]) -> None:
    require_real_slurm()
    # When the bench runs 6 short jobs on 8 nodes (the workload has jobs of up to 8 nodes), with and without Osprey
    assert (
        main(["--jobs", "6", "--nodes", "8", "--min-duration", "1", "--max-duration", "4", "--interval", "1"])
        == 0
    )
    out = capsys.readouterr().out
    # Then each scheduler has its line, the layered run its ratio, and both models their fidelity
    for name in ("slurm", "slurm\\+osprey"):
        assert re.search(rf"^scheduler={name} mean_wait_s=[\d.]+ makespan_s=[\d.]+$", out, re.M), out
        assert re.search(rf"^fidelity scheduler={name} order_tau=-?[\d.]+ wait_ratio=[\d.]+ ", out, re.M), out
    assert re.search(r"^ratio slurm\+osprey/slurm mean_wait=[\d.]+ makespan=[\d.]+ ", out, re.M), out
