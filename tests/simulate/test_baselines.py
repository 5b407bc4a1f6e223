"""The defining behaviour of each baseline, on scenarios small enough to check by hand."""

from __future__ import annotations

import pytest

from osprey.simulate import FairShare
from tests.simulate.helpers import by_id, job, run, workload


def test_fifo_head_of_line_blocking() -> None:
    # Given 16 GPUs with an 8-GPU job running until 1000 s, when a 16-GPU job and then a small job arrive,
    # then FIFO holds the small job behind the big one although 8 GPUs sit free; BestEffort Kueue does not.
    scenario = workload(job("a", 0, 8, 1000), job("big", 10, 16, 500), job("small", 20, 8, 100))
    sim = run(scenario, "fifo")
    fifo = by_id(sim)
    assert fifo["big"][1] == 1000
    assert fifo["small"][1] == 1500  # only after "big" finished
    # The free node counts as idle while jobs that could use it wait (10 s .. 1000 s), not afterwards.
    assert sim.ledger.window_free_idle_gpu_s == pytest.approx(8 * 990)
    assert by_id(run(scenario, "kueue"))["small"][1] == 20


def test_nogang_holds_a_partial_gang_idle() -> None:
    # Given the same cluster, when a 16-GPU gang arrives while 8 GPUs are busy, then without gang scheduling
    # one of its workers binds to the free node and sits there idle until the other node frees up.
    scenario = workload(job("a", 0, 8, 1000), job("gang", 10, 16, 500), job("small", 20, 8, 100))
    sim = run(scenario, "nogang")
    times = by_id(sim)
    assert times["gang"][1] == 1000
    assert times["small"][1] == 1500  # the free node was taken by the gang's idle worker
    assert sim.ledger.allocated_idle_gpu_s == pytest.approx(8 * (1000 - 10))
    # Idle counts that held-but-not-training GPU time.
    assert sim.ledger.window_allocated_idle_gpu_s > 0


def test_fairshare_serves_the_share_with_less_recent_usage_first() -> None:
    # Given share "heavy" that has used the cluster, when both shares queue a job at once, then the job of
    # share "light" goes first although it was submitted later.
    scenario = workload(
        job("heavy-1", 0, 16, 3600, share="heavy"),
        job("heavy-2", 100, 16, 100, share="heavy"),
        job("light-1", 200, 16, 100, share="light"),
    )
    times = by_id(run(scenario, FairShare(share_decay_s=3600)))
    assert times["light-1"][1] == 3600
    assert times["heavy-2"][1] == 3700
    assert by_id(run(scenario, "fifo"))["heavy-2"][1] == 3600


def test_fairshare_weight_factor_favours_the_lower_weight() -> None:
    # Given equal past usage, a share with weightFactor 0.125 ranks before one with 1.0.
    scenario = workload(
        job("x-1", 0, 8, 1000, share="x"),
        job("y-1", 0, 8, 1000, share="y"),
        job("x-2", 10, 16, 100, share="x"),
        job("y-2", 20, 16, 100, share="y"),
    )
    times = by_id(run(scenario, FairShare(share_decay_s=3600, weight_factors={"y": 0.125})))
    assert times["y-2"][1] == 1000
    assert times["x-2"][1] == 1100


def test_oracle_runs_the_least_remaining_gpu_time_first() -> None:
    scenario = workload(job("a", 0, 16, 100), job("long", 10, 16, 5000), job("short", 20, 16, 50))
    times = by_id(run(scenario, "oracle"))
    assert times["short"][1] == 100
    assert times["long"][1] == 150
