"""``kueue-cohort`` (issue 37, item 1): one Kueue ClusterQueue per team in a cohort, as Kueue v0.17.0 admits,
borrows, lends and reclaims.

Given two teams of 8 GPUs each on 16 GPUs, when one team has work and the other none, then the busy team
borrows the idle quota, unless a lending or borrowing limit says no; when the lender then submits, it reclaims
its quota at once (``reclaimWithinCohort: Any``), or waits when reclaim is off; inside a team a higher priority
preempts a lower one, never another team's workload within its quota.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.simulate import SimulationError, Simulator, Workload
from osprey.simulate.results import summarize
from osprey.simulate.tenants import Tenant, Tenants
from tests.simulate.helpers import job, run, workload


def _shared(scenario: Workload, *teams: Tenant) -> Simulator:
    return run(replace(scenario, tenants=Tenants(teams)), "kueue-cohort")


def _borrow_then_reclaim() -> Workload:
    # a fills its own 8 GPUs and wants 8 more at 0 s; b submits 8 GPUs' worth at 10 s
    return workload(
        job("a1", 0, 8, 1000, share="a"),
        job("a2", 0, 8, 1000, share="a"),
        job("b1", 10, 8, 1000, share="b"),
    )


def test_an_idle_quota_is_lent_and_reclaimed_at_once() -> None:
    sim = _shared(_borrow_then_reclaim(), Tenant("a", 8), Tenant("b", 8))
    runs = {r.job.job_id: r for r in sim.runs}
    # Then a2 borrowed b's idle quota at 0 s, and b1 took it back at 10 s: a2 (a's most recently admitted
    # borrowing workload) was preempted and ran again after a1 ended
    assert runs["a2"].preemptions == 1
    assert runs["a1"].preemptions == 0
    assert runs["b1"].queued_s == pytest.approx(0.0)
    assert runs["a2"].queued_s == pytest.approx(1000.0 - 10.0)
    result = summarize(sim, derives_priorities=False)
    reclaim = {t.team: t.p95_reclaim_s for t in result.teams}
    assert reclaim["b"] == pytest.approx(0.0)


def test_without_reclaim_the_lender_waits_for_the_borrower_to_finish() -> None:
    sim = _shared(_borrow_then_reclaim(), Tenant("a", 8), Tenant("b", 8, reclaim_within_cohort="Never"))
    runs = {r.job.job_id: r for r in sim.runs}
    assert runs["a2"].preemptions == 0
    assert runs["b1"].queued_s == pytest.approx(1000.0 - 10.0)
    reclaim = {t.team: t.p95_reclaim_s for t in summarize(sim, derives_priorities=False).teams}
    assert reclaim["b"] == pytest.approx(990.0)


@pytest.mark.parametrize(
    "teams",
    [
        (Tenant("a", 8), Tenant("b", 8, lending_limit_gpus=0)),  # b lends nothing
        (Tenant("a", 8, borrowing_limit_gpus=4), Tenant("b", 8)),  # a may borrow only 4
    ],
)
def test_lending_and_borrowing_limits_keep_a_team_inside_them(teams: tuple[Tenant, Tenant]) -> None:
    scenario = workload(job("a1", 0, 8, 1000, share="a"), job("a2", 0, 8, 1000, share="a"))
    runs = {r.job.job_id: r for r in _shared(scenario, *teams).runs}
    # Then a2 does not borrow b's idle 8 GPUs: it waits for a1 although half the cluster is free
    assert runs["a2"].queued_s == pytest.approx(1000.0)


def test_gpus_outside_every_quota_stay_unused() -> None:
    scenario = workload(job("a1", 0, 8, 1000, share="a"), job("a2", 0, 8, 1000, share="a"))
    runs = {r.job.job_id: r for r in _shared(scenario, Tenant("a", 8)).runs}
    assert runs["a2"].queued_s == pytest.approx(1000.0)


def test_a_higher_priority_preempts_inside_its_team_only() -> None:
    # Given a holds its 8 GPUs with a low-priority job and b holds its 8; a high-priority job of a arrives
    scenario = workload(
        job("a-low", 0, 8, 1000, share="a", priority_class=0),
        job("b1", 0, 8, 1000, share="b", priority_class=0),
        job("a-high", 10, 8, 1000, share="a", priority_class=100),
    )
    runs = {r.job.job_id: r for r in _shared(scenario, Tenant("a", 8), Tenant("b", 8)).runs}
    # Then it takes a's own GPUs (withinClusterQueue: LowerPriority), not b's (b is within its quota)
    assert runs["a-low"].preemptions == 1
    assert runs["b1"].preemptions == 0
    assert runs["a-high"].queued_s == pytest.approx(0.0)


def test_a_team_reclaims_up_to_its_quota_and_not_beyond_it() -> None:
    # Given 16 GPUs in 4-GPU nodes, a's quota 4 and b's 12: at 0 s a runs two jobs (one borrowing b's idle
    # quota) and b two; b submits one more at 10 s (within its quota) and another at 20 s (beyond it)
    scenario = workload(
        job("a1", 0, 4, 1000, share="a"),
        job("a2", 0, 4, 1000, share="a"),
        job("b1", 0, 4, 1000, share="b"),
        job("b2", 0, 4, 1000, share="b"),
        job("b3", 10, 4, 1000, share="b"),
        job("b4", 20, 4, 1000, share="b"),
        nodes=(4, 4, 4, 4),
    )
    runs = {r.job.job_id: r for r in _shared(scenario, Tenant("a", 4), Tenant("b", 12)).runs}
    # Then b3 reclaims the borrowed GPUs at once, from a's borrowing job, not from a1 inside a's quota
    assert runs["b3"].queued_s == pytest.approx(0.0)
    assert runs["a2"].preemptions == 1
    assert runs["a1"].preemptions == 0
    # ... and b4, which would borrow, cannot take from a team at its quota: it waits for GPUs to free up
    assert runs["b4"].queued_s == pytest.approx(1000.0 - 20.0)


def test_the_cohort_needs_the_teams_quotas() -> None:
    with pytest.raises(SimulationError, match="kueue-cohort needs the teams' quotas: give a tenants file"):
        run(_borrow_then_reclaim(), "kueue-cohort")


def test_the_cli_runs_the_cohort_with_osprey_and_refuses_it_without_tenants(tmp_path: Path) -> None:
    runner = CliRunner()
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "job_id,submit_time_s,num_gpus,duration_s,share\na1,0,8,500,a\na2,0,8,500,a\nb1,10,8,100,b\n"
    )
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("teams:\n  - name: a\n    nominalGpus: 8\n  - name: b\n    nominalGpus: 8\n")
    args = [
        "simulate",
        "--workload",
        str(jobs),
        "--gpus",
        "16",
        "--schedulers",
        "kueue-cohort,kueue-cohort+osprey",
    ]
    result = runner.invoke(app, [*args, "--tenants", str(tenants)])
    assert result.exit_code == 0, result.output
    assert "kueue-cohort+osprey" in result.stdout
    # ... with each team's reclaim wait under the table: b's job reclaimed its quota at once
    assert "  kueue-cohort: a " in result.stdout
    assert "b 0.0" in result.stdout.split("  kueue-cohort: ")[1]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert (
        "kueue-cohort, kueue-cohort+osprey model teams with quotas: give --tenants FILE.yaml" in result.output
    )
    tenants.write_text("teams:\n  - name: a\n    nominalGpus: 8\n    reclaimWithinCohort: Sometimes\n")
    result = runner.invoke(app, [*args, "--tenants", str(tenants)])
    assert result.exit_code == 1
    assert (
        "teams[0].reclaimWithinCohort: must be one of Never, LowerPriority, Any, got 'Sometimes'"
        in result.output
    )


def test_a_job_its_team_can_never_hold_is_an_error_before_the_run() -> None:
    scenario = workload(job("a1", 0, 16, 100, share="a"))
    with pytest.raises(
        SimulationError, match=r"job a1 asks for 16 GPUs, more than team 'a' can ever hold .*\(12:"
    ):
        _shared(scenario, Tenant("a", 8, borrowing_limit_gpus=4), Tenant("b", 8))


def test_the_cohort_oracle_keeps_the_quotas_and_runs_the_least_gpu_time_first() -> None:
    # Given a fills its quota with a long job and queues a long and a short one; b is idle
    scenario = workload(
        job("a-first", 0, 8, 1000, share="a"),
        job("a-long", 1, 8, 5000, share="a"),
        job("a-short", 2, 8, 100, share="a"),
        job("b1", 50, 8, 1000, share="b"),
    )
    runs = {
        r.job.job_id: r
        for r in run(
            replace(scenario, tenants=Tenants((Tenant("a", 8), Tenant("b", 8)))), "oracle-cohort"
        ).runs
    }
    # Then a-long borrows b's idle quota at once (the only job waiting then), b1 reclaims it at 50 s, and
    # once a-first ends a-short goes before the preempted a-long: least remaining GPU-time first
    assert runs["a-long"].preemptions == 1
    assert runs["b1"].queued_s == pytest.approx(0.0)
    assert runs["a-short"].queued_s == pytest.approx(1000.0 - 2.0)
    assert runs["a-long"].first_train_s == pytest.approx(1.0)


def test_a_job_larger_than_its_quota_preempts_nothing_without_borrow_within_cohort() -> None:
    # Given a's low-priority job holds a's 8 GPUs and b is idle; a's 16-GPU job (beyond a's quota) arrives,
    # higher in priority (found by review: Kueue gives it NoFit, flavorassigner.go, so it preempts no one)
    scenario = workload(
        job("a1", 0, 8, 1000, share="a", priority_class=0),
        job("a2", 10, 16, 1000, share="a", priority_class=10),
    )
    runs = {r.job.job_id: r for r in _shared(scenario, Tenant("a", 8), Tenant("b", 8)).runs}
    # Then a1 runs on and a2 waits for it
    assert runs["a1"].preemptions == 0
    assert runs["a2"].queued_s == pytest.approx(1000.0 - 10.0)


def test_a_job_whose_quota_fits_but_not_the_free_nodes_waits_without_preempting() -> None:
    # Given a's quota of 16 holds two 6-GPU jobs, one on each 8-GPU node (2 GPUs free on each), and a 4-GPU job
    # of a at a higher priority (found by review: Kueue admits on quota alone; here it waits for a node to free
    # up, evicting no one)
    scenario = workload(
        job("a1", 0, 6, 1000, share="a", priority_class=0),
        job("a2", 0, 6, 2000, share="a", priority_class=0),
        job("a3", 10, 4, 1000, share="a", priority_class=10),
    )
    runs = {r.job.job_id: r for r in _shared(scenario, Tenant("a", 16)).runs}
    assert [runs[name].preemptions for name in ("a1", "a2")] == [0, 0]
    assert runs["a3"].queued_s == pytest.approx(1000.0 - 10.0)
