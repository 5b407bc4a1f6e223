"""fairshare+osprey: the team x size-class shares production uses, weighted by the production fold_weights, so
a team keeps its fair share under Osprey (docs/metrics-and-actuation.md, AWS Batch)."""

from __future__ import annotations

import pytest

from osprey.simulate import FairShare, FairShareOsprey
from osprey.simulate.runner import load_default_policy
from osprey_control.backends import batch as production
from tests.simulate.helpers import by_id, job, run, workload

# Team a fills the cluster and queues two more jobs before team b submits its first one.
HOG = workload(
    job("a1", 0, 8, 1000, share="a", declared=3600),
    job("a2", 1, 8, 5000, share="a", declared=7200),
    job("a3", 2, 8, 1000, share="a", declared=3600),
    job("a4", 3, 8, 1000, share="a", declared=3600),
    job("b1", 10, 8, 1000, share="b", declared=3600),
)


def test_jobs_are_in_their_teams_size_class_shares() -> None:
    # Given jobs of two teams and two sizes / When fairshare+osprey places them in shares
    scheduler = FairShareOsprey(load_default_policy())
    sim = run(workload(job("s", 0, 4, 60, share="a"), job("l", 0, 16, 60, share="a")), scheduler)
    # Then each share is the production identifier: the team's, per size class
    assert [scheduler.share_of(r) for r in sim.runs] == ["osprey-a-g0", "osprey-a-g1"]
    assert scheduler.share_of(sim.runs[0]) == production.team_share_identifier("a", 4)


def test_weights_are_the_production_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a spy on the production fold_weights
    answers: list[dict[str, float]] = []
    real = production.fold_weights

    def spy(*args: object, **kwargs: object) -> dict[str, float]:
        answer = real(*args, **kwargs)  # type: ignore[arg-type]
        answers.append(answer)
        return answer

    monkeypatch.setattr("osprey.simulate.layered.fold_weights", spy)
    scheduler = FairShareOsprey(load_default_policy(), cycle_s=60)
    # When the hog scenario runs
    run(HOG, scheduler)
    # Then every cycle's weights came from it, and the scheduler holds its last answer
    assert len(answers) > 10
    for share, weight in answers[-1].items():
        assert scheduler.weight_of(share) == weight


def test_a_team_that_has_used_less_gets_the_next_free_gpus() -> None:
    # Given team a holding the cluster with two more jobs queued, and team b's first job queued after them
    # When a's first job ends (t=1000)
    layered = by_id(run(HOG, FairShareOsprey(load_default_policy(), cycle_s=60)))
    # Then b's job starts before a's queued ones: b has no usage, a has 16 GPUs' worth
    assert layered["b1"][1] < layered["a3"][1]
    assert layered["b1"][0] == pytest.approx(990, abs=120)
    # And that is the native fair share's answer too (the team's share, as before Osprey)
    native = by_id(run(HOG, FairShare()))
    assert native["b1"][1] < native["a3"][1]


def test_a_large_job_blocks_only_its_own_size_class() -> None:
    # Given team a's 32-GPU job queued behind its running 24-GPU job on a 32-GPU cluster, then an 8-GPU job
    scenario = workload(
        job("run", 0, 24, 3000, share="a"),
        job("big", 5, 32, 1000, share="a"),
        job("small", 10, 8, 1000, share="a"),
        nodes=(8, 8, 8, 8),
    )
    # When it runs natively (one share for the team) and under Osprey (one share per size class)
    native = by_id(run(scenario, FairShare()))
    layered = by_id(run(scenario, FairShareOsprey(load_default_policy(), cycle_s=60)))
    # Then natively the small job waits for the big one (head of the team's share); under Osprey it starts
    # beside the running job at once
    assert native["small"][0] > 3000
    assert layered["small"][0] < 60
    # And the big job starts when the running one ends, in both
    assert layered["big"][0] == pytest.approx(native["big"][0])
