"""Shared clusters in the simulator (issue 37, items 1 and 3): a tenants file names each team's quota, borrowing
and lending limits and fair-share weight.

Given a tenants file, then a bad one is refused naming the field; ``fairness`` is measured against the quotas
(each team's quota while it has work, plus a weight-proportional part of what the others leave idle); each
team's ``p95_reclaim_s`` is how long its jobs that fitted in its unused quota waited; and Batch fair share
weighs the teams by their ``fairShareWeight``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.simulate import family_workload
from osprey.simulate.results import summarize
from osprey.simulate.tenant_draw import draw_tenants
from osprey.simulate.tenants import Tenant, Tenants, TenantsError, ceiling_gpus, entitlement, parse_tenants
from tests.simulate.helpers import job, run, workload

runner = CliRunner()


def _teams(*teams: dict[str, Any]) -> dict[str, Any]:
    return {"teams": list(teams)}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_teams({"name": "a"}), "teams[0].nominalGpus: required"),
        (
            _teams({"name": "a", "nominalGpus": -1}),
            "teams[0].nominalGpus: must be a whole number of GPUs >= 0",
        ),
        (_teams({"name": "a", "nominalGpus": 2.5}), "teams[0].nominalGpus: must be a whole number"),
        (
            _teams({"name": "a", "nominalGpus": 8, "quota": 3}),
            "teams[0].quota: unknown field; allowed: name,",
        ),
        (_teams({"nominalGpus": 8}), "teams[0].name: required"),
        (_teams({"name": "a", "nominalGpus": 8, "fairShareWeight": 0}), "teams[0].fairShareWeight: must be"),
        (
            _teams(
                {"name": "a", "nominalGpus": 8}, {"name": "b", "nominalGpus": 8, "borrowingLimitGpus": "x"}
            ),
            "teams[1].borrowingLimitGpus: must be a whole number",
        ),
        (
            _teams({"name": "a", "nominalGpus": 8}, {"name": "a", "nominalGpus": 4}),
            "teams[1].name: 'a' is given",
        ),
        ({"teams": []}, "teams: must be a non-empty list"),
        # found by review: Kueue's webhook refuses a lendingLimit above the nominal quota; a YAML number as a name
        (
            _teams({"name": "a", "nominalGpus": 8, "lendingLimitGpus": 9}),
            "teams[0].lendingLimitGpus: 9 is more than the team's nominalGpus (8)",
        ),
        (
            _teams({"name": 123, "nominalGpus": 8}),
            "teams[0].name: must be a non-empty string (quote it in YAML), got 123",
        ),
        ({"tenants": []}, "one key, teams"),
    ],
)
def test_a_bad_tenants_file_is_refused_naming_the_field(document: object, message: str) -> None:
    with pytest.raises(TenantsError) as raised:
        parse_tenants(document)
    assert message in str(raised.value)


def _two(**b: Any) -> Tenants:
    return Tenants((Tenant("a", 16), Tenant("b", 16, **b)))


def test_a_team_is_entitled_to_its_quota_and_borrows_what_the_others_lend() -> None:
    # Given 32 GPUs split 16/16: b asks for only 4, so a may use b's 12 unused GPUs on top of its own 16
    assert entitlement(32, _two(), {"a": 32, "b": 4}) == {"a": 28.0, "b": 4.0}
    # ... unless b lends at most 8 of them, or a may borrow at most 4
    assert entitlement(32, _two(lending_limit_gpus=8), {"a": 32, "b": 4}) == {"a": 24.0, "b": 4.0}
    capped = Tenants((Tenant("a", 16, borrowing_limit_gpus=4), Tenant("b", 16)))
    assert entitlement(32, capped, {"a": 32, "b": 4}) == {"a": 20.0, "b": 4.0}
    # ... and a team without work is owed nothing
    assert entitlement(32, _two(), {"a": 8}) == {"a": 8.0}


def test_idle_gpus_are_shared_in_proportion_to_the_weights_up_to_each_demand() -> None:
    # Given 24 GPUs, a holds its quota of 8, and b (weight 1) and c (weight 3) have no quota
    tenants = Tenants((Tenant("a", 8), Tenant("b", 0), Tenant("c", 0, fair_share_weight=3)))
    # Then the 16 GPUs beyond a's quota go 1:3
    assert entitlement(24, tenants, {"a": 8, "b": 100, "c": 100}) == {"a": 8.0, "b": 4.0, "c": 12.0}
    # ... and when c wants only 6, b gets the rest
    assert entitlement(24, tenants, {"a": 8, "b": 100, "c": 6}) == {"a": 8.0, "b": 10.0, "c": 6.0}


def test_quotas_larger_than_the_cluster_and_unknown_teams_are_errors() -> None:
    scenario = workload(job("a1", 0, 8, 100, share="a"), job("x1", 0, 8, 100, share="x"))
    with pytest.raises(TenantsError, match=r"teams\[\]\.nominalGpus: the quotas add up to 32 GPUs"):
        _two().check(scenario)
    with pytest.raises(TenantsError, match="job x1: its team \\(share\\) 'x' is not in the tenants file"):
        Tenants((Tenant("a", 8), Tenant("b", 8))).check(scenario)


def test_fairness_is_measured_against_the_quotas_and_reclaim_waits_per_team() -> None:
    # Given 16 GPUs shared 12 (a) / 4 (b): b submits two 8-GPU jobs at 0 and FIFO runs both for 1000 s;
    # a submits one 8-GPU job at 10 s, which fits in a's unused quota, and waits until 1000 s.
    scenario = workload(
        job("b1", 0, 8, 1000, share="b"),
        job("b2", 0, 8, 1000, share="b"),
        job("a1", 10, 8, 1000, share="a"),
    )
    tenants = Tenants((Tenant("a", 12), Tenant("b", 4)))
    equal = summarize(run(scenario, "fifo"), derives_priorities=False)
    shared = summarize(run(replace(scenario, tenants=tenants), "fifo"), derives_priorities=False)

    # Then against an equal split a got nothing of its 8 entitled GPUs while b got 16 of 8 ...
    assert equal.entitlement == "equal"
    # ... and against the quotas a was owed 8 (its demand, within its 12) and b only 8 (its 4 and what a
    # left idle): a still got nothing while queued, so the index is 1/2 in both; the entitlements differ.
    assert shared.entitlement == "quota"
    teams = {figures.team: figures for figures in shared.teams}
    assert teams["a"].service_ratio == 0.0
    assert teams["b"].service_ratio is None  # b never queued: both its jobs started at once
    # ... a's job was owed its GPUs at 10 s and admitted at 1000 s; b's jobs were never owed (b's quota is 4)
    assert teams["a"].p95_reclaim_s == pytest.approx(990.0)
    assert teams["b"].p95_reclaim_s is None
    assert {figures.team: figures.p95_reclaim_s for figures in equal.teams} == {"a": None, "b": None}


def test_a_team_is_entitled_to_less_when_another_holds_a_larger_quota() -> None:
    # Given 16 GPUs and two teams that each keep 16 one-GPU jobs queued from 0 s for 1000 s each
    jobs = [job(f"{team}{i}", 0, 1, 1000, share=team) for i in range(16) for team in ("a", "b")]
    scenario = workload(*jobs)
    equal = summarize(run(scenario, "fifo"), derives_priorities=False)
    skewed = Tenants((Tenant("a", 12), Tenant("b", 4)))
    shared = summarize(run(replace(scenario, tenants=skewed), "fifo"), derives_priorities=False)
    # Then FIFO's even 8/8 split is fair against an equal split, and unfair against quotas of 12 and 4
    assert equal.fairness == pytest.approx(1.0)
    ratios = {figures.team: figures.service_ratio for figures in shared.teams}
    assert ratios["a"] is not None
    assert ratios["b"] is not None
    assert ratios["a"] < 1.0 < ratios["b"]
    assert shared.fairness < 0.95


def _flood() -> list[Any]:
    # Two teams flooding 8 GPUs with one-GPU jobs of uneven lengths (so ends, and picks, are staggered).
    return [
        job(f"{team}{i}", 0, 1, 60 + (i * 37 + offset) % 120, share=team)
        for i in range(150)
        for team, offset in (("a", 0), ("b", 11))
    ]


def test_batch_fair_share_serves_a_team_with_three_times_the_weight_first() -> None:
    # Given two teams flooding one 8-GPU node with the same work, first with equal weights, then with a's
    # fairShareWeight 3 (Batch weightFactor 1/3)
    scenario = workload(*_flood(), nodes=(8,))
    weighted = Tenants((Tenant("a", 4, fair_share_weight=3.0), Tenant("b", 4)))
    for scheduler in ("fairshare", "fairshare+osprey"):
        even = summarize(run(scenario, scheduler), derives_priorities=False)
        tilted = summarize(run(replace(scenario, tenants=weighted), scheduler), derives_priorities=False)
        waits = {t.team: t.mean_wait_s for t in even.teams}
        tilted_waits = {t.team: t.mean_wait_s for t in tilted.teams}
        # Then equal weights make the teams wait about alike, and weight 3 lets a's jobs through well ahead
        assert waits["a"] == pytest.approx(waits["b"], rel=0.2), (scheduler, waits)
        assert tilted_waits["a"] < 0.7 * tilted_waits["b"], (scheduler, tilted_waits)


def test_the_cli_reads_a_tenants_file_and_names_the_field_of_a_bad_one(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "job_id,submit_time_s,num_gpus,duration_s,share\nb1,0,8,500,b\nb2,0,8,500,b\na1,10,8,100,a\n"
    )
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("teams:\n  - name: a\n    nominalGpus: 12\n  - name: b\n    nominalGpus: 4\n")
    args = ["simulate", "--workload", str(jobs), "--gpus", "16", "--schedulers", "fifo,fairshare"]
    result = runner.invoke(app, [*args, "--tenants", str(tenants), "--json"])
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert {o["entitlement"] for o in objects} == {"quota"}
    # ... a's one job fitted in a's unused quota and waited for b's to end (500 s and their startup)
    a = objects[0]["teams"]["a"]
    assert a["p95_reclaim_s"] == pytest.approx(a["mean_wait_s"])
    assert a["p95_reclaim_s"] >= 490.0
    # When a team is missing a quota, or the file names a team the workload does not know of
    tenants.write_text("teams:\n  - name: a\n  - name: b\n    nominalGpus: 4\n")
    result = runner.invoke(app, [*args, "--tenants", str(tenants)])
    assert result.exit_code == 1
    assert f"--tenants {tenants}: teams[0].nominalGpus: required" in result.output
    tenants.write_text("teams:\n  - name: a\n    nominalGpus: 4\n")
    result = runner.invoke(app, [*args, "--tenants", str(tenants)])
    assert result.exit_code == 1
    assert "job b1: its team (share) 'b' is not in the tenants file (teams: a)" in result.output


@pytest.mark.parametrize("seed", range(5000, 5012))
def test_drawn_quotas_fill_the_cluster_and_fit_every_job(seed: int) -> None:
    # Given a family draw and quotas drawn for its teams
    scenario = family_workload(seed)
    tenants = draw_tenants(scenario, seed)
    # Then the same seed draws the same quotas, every team of the workload has one, they fill the cluster, and
    # a cohort of them can hold each team's largest job (no job left pending for good)
    assert draw_tenants(scenario, seed) == tenants
    assert {team.name for team in tenants.teams} == {drawn.share for drawn in scenario.jobs}
    assert tenants.nominal_gpus == scenario.total_gpus
    for drawn in scenario.jobs:
        assert drawn.gpus <= ceiling_gpus(tenants, drawn.share), drawn.job_id
    tenants.check(scenario)


def test_the_cli_draws_quotas_for_the_workloads_teams() -> None:
    args = ["simulate", "--workload", "seed", "--schedulers", "kueue-cohort", "--tenants", "drawn", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["entitlement"] == "quota"
    assert set(row["teams"]) == {"team-a", "team-b", "team-c"}


def test_a_file_that_is_not_text_is_refused_naming_the_flag(tmp_path: Path) -> None:
    # Found by review: a file that is not UTF-8 escaped as an unexpected error
    tenants = tmp_path / "tenants.yaml"
    tenants.write_bytes(b"teams:\n  - name: \xff\n")
    result = runner.invoke(
        app, ["simulate", "--workload", "seed", "--schedulers", "fifo", "--tenants", str(tenants)]
    )
    assert result.exit_code == 1
    assert f"--tenants {tenants}: {tenants} is not UTF-8 text" in result.output


def test_a_job_its_team_can_never_hold_is_refused_before_any_scheduler_runs(tmp_path: Path) -> None:
    # Found by review: the cohort's check ran only when its turn came, after the other schedulers had run
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,submit_time_s,num_gpus,duration_s,share\na1,0,16,500,a\n")
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("teams:\n  - name: a\n    nominalGpus: 8\n    borrowingLimitGpus: 0\n")
    args = ["simulate", "--workload", str(jobs), "--gpus", "16", "--tenants", str(tenants), "--json"]
    result = runner.invoke(app, [*args, "--schedulers", "fifo,kueue-cohort"])
    assert result.exit_code == 1
    assert "job a1 asks for 16 GPUs, more than team 'a' can ever hold in the cohort (8:" in result.output
    assert '"scheduler"' not in result.stdout  # fifo never ran
    # ... while the schedulers without a cohort run it
    assert runner.invoke(app, [*args, "--schedulers", "fifo"]).exit_code == 0
