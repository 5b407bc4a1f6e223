"""Given the real-Slurm benchmark (bench/slurm_bench.py), when it runs a tiny workload, then it prints its
result, ratio and fidelity lines: a smoke test, so a change to what it reads (a native id, a policy) cannot
break it unnoticed. The numbers themselves are the bench's business, never asserted here."""

from __future__ import annotations

import re
import shutil
import time

import pytest
from bench.fidelity import noise_line
from bench.slurm_bench import compressed_policy, main, simulated_jobs, workload
from bench.slurm_loop import SlurmOspreyLoop

from osprey_control.derivation import compile_policy
from tests.slurm.cluster import LocalSlurm
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
    # and each model its noise floor (the model against itself with submissions moved a little)
    for name in ("slurm", "slurm\\+osprey"):
        assert re.search(
            rf"^noise scheduler={name} order_tau=[\d.]+ \(min [\d.]+\) wait_ratio=", out, re.M
        ), out


def test_a_loop_whose_cycles_fail_keeps_cycling_and_reports_the_cause() -> None:
    # Given the bench's Osprey loop pointed at a slurmrestd that does not answer (a cluster never started)
    slurm = LocalSlurm(nodes=1, gpus=8, cluster="bench")
    try:
        loop = SlurmOspreyLoop(slurm, compile_policy(compressed_policy(240.0, capacity_gpus=8)), 0.05)
        # When it runs for a moment
        loop.start()
        time.sleep(0.5)
        loop.stop()
    finally:
        shutil.rmtree(slurm.root, ignore_errors=True)
    # Then every cycle failed, yet the loop went on to the next one (a failure no longer ends it), and its
    # health names how many failed and why, so a run like this cannot pass for a measurement
    assert loop.cycles == 0
    assert len(loop.failures) >= 3
    problem = loop.health()
    assert problem is not None
    assert f"{len(loop.failures)} cycles failed (first: SlurmUnavailableError: " in problem
    assert "slurmrestd" in problem


def test_the_fidelity_noise_floor_of_the_native_model_is_near_one() -> None:
    # Given the bench's default workload of seed 0, when the native slurm model is compared with itself with
    # submissions moved by up to 0.3 s, then its order barely changes (the baseline's goal is reachable)
    line = noise_line(
        "slurm",
        simulated_jobs(workload(40, 5, 30, 0)),
        [8] * 8,
        policy=compressed_policy(240.0, capacity_gpus=64),
        cycle_s=2.0,
    )
    match = re.match(
        r"noise scheduler=slurm order_tau=([\d.]+) \(min ([\d.]+)\) wait_ratio=([\d.]+)\.\.([\d.]+) ", line
    )
    assert match, line
    assert float(match[2]) >= 0.9
    assert 0.9 <= float(match[3]) <= float(match[4]) <= 1.1
