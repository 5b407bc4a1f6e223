"""Given the fidelity measure the real-scheduler benches print (bench/fidelity.py), then it agrees with what a
user would compute by hand, and the simulator's model runs on a bench's submissions."""

from __future__ import annotations

import pytest
from bench.fidelity import Run, fidelity_line, kendall_tau_b, simulated_starts

from osprey.simulate.model import Job


def test_kendall_tau_b_counts_agreements_disagreements_and_ties() -> None:
    assert kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau_b([1, 2, 3, 4], [40, 30, 20, 10]) == -1.0
    # One swapped pair of six: (5 - 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # Ties (whole-second start times) are neither: tau-b's denominator leaves them out
    assert kendall_tau_b([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / (2 * 3) ** 0.5)
    with pytest.raises(ValueError, match="differ in length"):
        kendall_tau_b([1, 2], [1])


def test_a_run_compared_with_itself_meets_the_goal_and_a_reordered_one_does_not() -> None:
    real = Run({"a": 0.0, "b": 1.0, "c": 2.0}, {"a": 0.0, "b": 5.0, "c": 9.0})
    assert fidelity_line("slurm", real, real) == (
        "fidelity scheduler=slurm order_tau=1.00 wait_ratio=1.00 (goal tau>=0.9 and 0.85..1.15: met)"
    )
    reordered = Run(real.submitted, {"a": 9.0, "b": 5.0, "c": 0.0})
    assert fidelity_line("slurm", real, reordered).endswith("MISSED)")


def test_the_slurm_model_starts_a_bench_workload_in_submission_order_when_each_job_fills_the_cluster() -> (
    None
):
    # Given three whole-cluster jobs (2 nodes of 8 GPUs), each submitted while the one before runs
    jobs = [
        Job(f"bench-{i}", submit_s=float(i), gpus=16, duration_s=10.0, declared_runtime_s=60.0)
        for i in range(3)
    ]
    # When the simulator's Slurm model runs them
    run = simulated_starts("slurm", jobs, [8, 8])
    # Then each starts when the one before ends, so the waits are 0, 9 and 18 s
    assert [run.started[f"bench-{i}"] for i in range(3)] == [0.0, 10.0, 20.0]
    assert run.mean_wait_s == pytest.approx(9.0)
