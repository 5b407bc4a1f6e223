"""Team fairness (``osprey.simulate.fairness``): Given hand-made workloads whose answer is worked out by hand,
when they run, then ``fairness`` is Jain's index over the teams that had queued work of GPU-time received /
entitled (water-filled) while queued; and per-team waits and GPU-hours add up to the totals for every
scheduler."""

from __future__ import annotations

import math

import pytest

from osprey.simulate import SCHEDULERS, Status, llm_workload, seed_workload
from osprey.simulate.fairness import jain, water_fill
from osprey.simulate.results import summarize
from osprey.simulate.runner import make_scheduler
from tests.simulate.helpers import job, run, workload


def test_water_filling_caps_small_demands_and_splits_the_rest_equally() -> None:
    # 24 GPUs: b asks for 4 and gets it, the 20 left are split 10/10 between a and c.
    assert water_fill(24.0, {"a": 30, "b": 4, "c": 12}) == {"b": 4.0, "a": 10.0, "c": 10.0}
    # Everyone fits: each gets its demand, the rest stays unassigned.
    assert water_fill(24.0, {"a": 8, "b": 8}) == {"a": 8.0, "b": 8.0}
    assert water_fill(24.0, {}) == {}


def test_jain_is_one_for_equal_values_and_one_over_n_when_one_gets_everything() -> None:
    assert jain([0.7, 0.7, 0.7]) == pytest.approx(1.0)
    assert jain([2.0, 0.0]) == pytest.approx(0.5)
    assert jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain([1.0, 0.5]) == pytest.approx(1.5**2 / (2 * 1.25))
    assert jain([0.3]) == 1.0  # fewer than two teams
    assert jain([]) == 1.0


def test_a_team_hogging_the_cluster_while_another_queues_scores_half() -> None:
    # Given 16 GPUs: team c's job holds one node for 5000 s and never queues; team a submits three 8-GPU
    # jobs at 0 and team b one at 1 s, all 1000 s, so FIFO runs a's three back to back before b's.
    scenario = workload(
        job("c1", 0, 8, 5000, share="c"),
        job("a1", 0, 8, 1000, share="a"),
        job("a2", 0, 8, 1000, share="a"),
        job("a3", 0, 8, 1000, share="a"),
        job("b1", 1, 8, 1000, share="b"),
    )
    sim = run(scenario, "fifo")
    result = summarize(sim, derives_priorities=False)
    teams = sim.ledger.teams

    # Then a queued over [0, 2000) holding 8 GPUs throughout; b queued over [1, 3000) and received nothing.
    # Entitled: a alone with c over [0, 1) gets 8; with b and c the 16 GPUs split 16/3 each.
    assert teams.received_gpu_s["a"] == pytest.approx(8 * 2000)
    assert teams.entitled_gpu_s["a"] == pytest.approx(8 * 1 + 16 / 3 * 1999)
    assert teams.entitled_gpu_s["b"] == pytest.approx(16 / 3 * 2999)
    assert teams.service_ratio("b") == 0.0
    # c never queued: it is left out, so the index is over a and b only, and one of two got nothing.
    assert teams.service_ratio("c") is None
    assert result.fairness == pytest.approx(0.5)
    figures = {t.team: t for t in result.teams}
    assert sorted(figures) == ["a", "b", "c"]
    assert figures["a"].mean_wait_s == pytest.approx(1000.0)  # 0, 1000 and 2000 s
    assert figures["b"].mean_wait_s == pytest.approx(2999.0)
    assert figures["c"].service_ratio is None
    # Window: the ideal makespan, (8 x 5000 + 24 x 1000 + 8 x 1000) / 16 = 4500 s.
    assert figures["a"].gpu_hours == pytest.approx(8 * 3000 / 3600)
    assert figures["b"].gpu_hours == pytest.approx(8 * 1000 / 3600)
    assert figures["c"].gpu_hours == pytest.approx(8 * 4500 / 3600)


def test_two_teams_served_alike_score_one() -> None:
    # Given 16 GPUs and two teams each submitting two 8-GPU jobs of 1000 s at once, interleaved.
    scenario = workload(
        job("a1", 0, 8, 1000, share="a"),
        job("b1", 0, 8, 1000, share="b"),
        job("a2", 0, 8, 1000, share="a"),
        job("b2", 0, 8, 1000, share="b"),
    )
    result = summarize(run(scenario, "fifo"), derives_priorities=False)
    # Then each holds 8 GPUs, its water-filled entitlement, while its second job queues.
    assert {t.team: t.service_ratio for t in result.teams} == {"a": 1.0, "b": 1.0}
    assert result.fairness == pytest.approx(1.0)


def test_one_team_with_queued_work_is_fair_by_definition() -> None:
    scenario = workload(job("a1", 0, 16, 1000, share="a"), job("a2", 0, 16, 1000, share="a"))
    result = summarize(run(scenario, "fifo"), derives_priorities=False)
    assert result.fairness == 1.0


def test_fairshare_with_osprey_is_measured_per_submitted_team_not_per_job_share() -> None:
    scenario = llm_workload(seed=2, jobs=30, gpus=128, load=1.3)
    sim = run(scenario, "fairshare+osprey")
    result = summarize(sim, derives_priorities=True)
    assert {t.team for t in result.teams} == {j.share for j in scenario.jobs}
    assert len(result.teams) <= 4


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("name", ["llm", "seed"])
def test_per_team_waits_and_gpu_hours_add_up_to_the_totals(scheduler: str, name: str) -> None:
    scenario = llm_workload(seed=3, jobs=40, gpus=128, load=1.3) if name == "llm" else seed_workload()
    sim = run(scenario, make_scheduler(scheduler, seed=0))
    result = summarize(sim, derives_priorities=False)
    finished = [r for r in sim.runs if r.status in (Status.DONE, Status.FAILED)]

    assert sum(t.jobs for t in result.teams) == result.jobs
    team_waits = math.fsum(
        t.mean_wait_s * sum(1 for r in finished if r.job.share == t.team) for t in result.teams
    )
    assert team_waits == pytest.approx(result.mean_wait_s * len(finished), rel=1e-9)
    ledger = sim.ledger
    assert math.fsum(t.gpu_hours for t in result.teams) * 3600 == pytest.approx(ledger.window_allocated_gpu_s)
    # The window's allocated GPU-time is what the idle figure splits: no more than the window holds.
    assert ledger.window_allocated_gpu_s <= ledger.window_gpu_s * (1 + 1e-12)
    # Received while queued is part of all GPU-time allocated in the run; nothing is left queued, demanded or
    # held at the end.
    teams = ledger.teams
    allocated = ledger.training_gpu_s + ledger.allocated_idle_gpu_s
    assert math.fsum(teams.received_gpu_s.values()) <= allocated * (1 + 1e-12)
    assert not teams.queued_jobs
    assert not teams.demand_gpus
    assert all(gpus == 0 for gpus in teams.allocated_gpus.values())
    assert 0.0 < result.fairness <= 1.0 + 1e-12
