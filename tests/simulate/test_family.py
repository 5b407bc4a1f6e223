"""The workload family (issue 36): Given a seed, when its workload is drawn, then it is the same workload every
time, the simulator accepts it, and what was drawn lies in the ranges docs/scheduling.md documents and is
printed in the workload's notes."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from osprey.simulate import draw_family, family_workload, simulate
from osprey.simulate.family import ARRIVALS, DECLARED, STARTUP_ALLOWANCE_S

SEEDS = range(60)
DAY = 86400.0


def test_a_seed_draws_the_same_workload_every_time_and_another_seed_another() -> None:
    first, again = family_workload(1000), family_workload(1000)
    assert first == again
    assert first.name == "family-1000"
    assert family_workload(1001).jobs != first.jobs


def test_every_seed_in_a_range_gives_a_workload_the_simulator_accepts() -> None:
    for seed in SEEDS:
        workload = family_workload(seed)
        workload.validate()  # raises SimulationError on a job the cluster cannot run
        assert workload.jobs, seed


def test_clusters_are_32_to_2048_gpus_of_8_gpu_nodes_and_gangs_whole_nodes_that_fit() -> None:
    sizes = []
    for seed in SEEDS:
        workload = family_workload(seed)
        assert set(workload.node_gpus) == {8}, seed
        assert 32 <= workload.total_gpus <= 2048, seed
        sizes.append(workload.total_gpus)
        for job in workload.jobs:
            assert job.gpus in (1, 2, 4, 8) or (job.gpus % 8 == 0 and job.gpus <= workload.total_gpus), job
    # Wide: the draws span at least an order of magnitude of cluster sizes.
    assert max(sizes) >= 10 * min(sizes)


def test_the_offered_gpu_time_is_the_drawn_load_times_the_cluster_over_the_arrival_span() -> None:
    loads = []
    for seed in SEEDS:
        draw, workload = draw_family(seed), family_workload(seed)
        offered = math.fsum(job.gpus * job.duration_s for job in workload.jobs)
        span = workload.jobs[-1].submit_s - workload.jobs[0].submit_s
        load = offered / (workload.total_gpus * span)
        assert 0.7 <= load <= 1.5, seed
        assert load == pytest.approx(draw.load, rel=1e-4), seed
        loads.append(load)
    assert max(loads) - min(loads) > 0.5  # the range is used, not one value


def test_durations_are_clipped_to_a_minute_and_a_week_and_come_from_both_tails() -> None:
    kinds = Counter(draw_family(seed).duration for seed in SEEDS)
    assert set(kinds) == {"lognormal", "pareto"}
    for seed in SEEDS:
        durations = [job.duration_s for job in family_workload(seed).jobs]
        assert min(durations) >= 60.0, seed
        assert max(durations) <= 7 * DAY, seed


def test_every_arrival_pattern_and_every_declared_limit_regime_appears_across_the_seeds() -> None:
    draws = [draw_family(seed) for seed in SEEDS]
    assert {draw.arrival for draw in draws} == set(ARRIVALS)
    assert {draw.declared for draw in draws} == set(DECLARED)
    assert {len(draw.teams) for draw in draws} >= {1, 6}
    assert {len(draw.classes) for draw in draws} == {1, 2, 3}  # none, two or three priority classes
    assert {draw.checkpoint_s == 0 for draw in draws} == {True, False}


def test_declared_limits_follow_the_drawn_regime() -> None:
    by_regime = {draw_family(seed).declared: seed for seed in SEEDS}
    none = family_workload(by_regime["none"]).jobs
    assert all(job.declared_runtime_s is None for job in none)
    for job in family_workload(by_regime["exact"]).jobs:
        assert job.declared_runtime_s == math.ceil(job.duration_s + STARTUP_ALLOWANCE_S)
    over_draw, over = draw_family(by_regime["over"]), family_workload(by_regime["over"])
    for job in over.jobs:
        declared = job.declared_runtime_s or 0.0
        # Between the duration and over_max (<= 10) x it, plus the startup allowance (and, in whole hours,
        # at most an hour of rounding up).
        assert job.duration_s + STARTUP_ALLOWANCE_S <= declared, job
        assert declared <= over_draw.over_max * job.duration_s + STARTUP_ALLOWANCE_S + 3600 + 1, job
    assert over_draw.over_max <= 10
    # Mixed: a draw with a fair share of each regime has jobs of all three.
    seed = next(
        seed
        for seed in SEEDS
        if draw_family(seed).declared == "mixed" and min(draw_family(seed).declared_mix) > 0.1
    )
    kinds = Counter(
        "none"
        if job.declared_runtime_s is None
        else "exact"
        if job.declared_runtime_s == math.ceil(job.duration_s + STARTUP_ALLOWANCE_S)
        else "over"
        for job in family_workload(seed).jobs
    )
    assert set(kinds) == {"none", "exact", "over"}


def test_a_flooding_team_submits_more_than_its_share() -> None:
    seed = next(
        seed for seed in SEEDS if draw_family(seed).arrival == "flood" and len(draw_family(seed).teams) > 1
    )
    draw, workload = draw_family(seed), family_workload(seed)
    share = dict(draw.teams)[draw.flooder]
    submitted = sum(job.share == draw.flooder for job in workload.jobs) / len(workload.jobs)
    assert submitted > share + 0.5 * draw.arrival_share * (1 - share)


def test_the_notes_say_what_was_drawn() -> None:
    draw, workload = draw_family(7), family_workload(7)
    text = "\n".join(workload.notes)
    assert f"family draw 7: {len(workload.jobs)} jobs on {workload.total_gpus} GPUs" in text
    assert f"offered load {draw.load:.2f}" in text
    assert draw.duration in text
    assert "teams: team-a" in text


def test_a_job_count_override_keeps_the_rest_of_the_draw() -> None:
    small = family_workload(1000, jobs=12)
    assert len(small.jobs) == 12
    assert small.node_gpus == family_workload(1000).node_gpus
    with pytest.raises(ValueError, match="at least 2 jobs"):
        family_workload(1000, jobs=1)


def test_a_small_draw_runs_under_a_scheduler() -> None:
    result = simulate(family_workload(1004, jobs=20), "kueue")
    assert result.workload == "family-1004"
    assert result.completed + result.failed == 20
