"""Given the shared-cluster benchmark on a tiny configuration (40 jobs on 64 GPUs, one seed, four teams), when it
runs, then it prints a ``scheduler=`` line per scheduler and load, issue 27's six goals and the ``reclaim`` goal for
each of its three pairs, and a closing count; ``reclaim`` is met by a pair whose ``+osprey`` changes no team's reclaim
wait. (Speed is the benchmark's business, never asserted.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bench.sim_bench import Goal
from bench.tenant_bench import PAIRS, main, reclaim_goals

from osprey.simulate.results import Result, TeamFigures
from tests.simulate.test_sim_bench import GOAL, LINE

TENANTS = "\n".join(
    [
        "teams:",
        *(
            f"  - name: team-{team}\n    nominalGpus: {gpus}"
            for team, gpus in zip("abcd", (24, 16, 16, 8), strict=True)
        ),
    ]
)


def test_the_bench_prints_every_scheduler_and_every_goal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(TENANTS + "\n")
    argv = ["--tenants", str(tenants), "--seeds", "0", "--jobs", "40", "--gpus", "64", "--processes", "1"]
    assert main([*argv, "--family-seeds", "5003"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    schedulers = [LINE.fullmatch(line) for line in lines if line.startswith("scheduler=")]
    assert all(schedulers), lines
    assert len(schedulers) == 3 * (
        2 * len(PAIRS) + 1
    )  # two loads and a draw; three pairs and the cohort oracle
    goals = [line for line in lines if line.startswith("goal=")]
    assert all(GOAL.fullmatch(line) for line in goals), goals
    assert len(goals) == 2 * 7 * len(PAIRS)
    assert re.fullmatch(r"goals met=\d+/42 total_seconds=\d+\.\d", lines[-1])
    # ... and the family draw, shared by quotas drawn for its teams: its schedulers, then each pair's six goals
    # and reclaim over the draws
    draw = [m for m in schedulers if m and m.group(2) == "family-5003-tenants"]
    assert len(draw) == 2 * len(PAIRS) + 1
    family = [line for line in lines if line.startswith("family pair=")]
    assert len(family) == 7 * len(PAIRS)
    assert all(re.fullmatch(r"family pair=\S+ goal=\S+ met=[01]/1 worst=family-5003-tenants .+: (met|MISSED)", line)
               for line in family), family  # fmt: skip


def _result(scheduler: str, reclaim_s: float | None) -> Result:
    team = TeamFigures("team-a", 1, 0.0, 0.0, None, reclaim_s)
    return Result(
        scheduler, "w", 1, 1, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, None, 0.0, 8, 1.0, teams=(team,)
    )


@pytest.mark.parametrize(("layered_s", "met"), [(100.0, True), (160.0, True), (161.0, False)])
def test_reclaim_allows_one_cycle_beyond_native_on_every_seed(layered_s: float, met: bool) -> None:
    native, layered = PAIRS[0]
    by_seed = {
        native: [_result(native, 100.0), _result(native, None)],
        layered: [_result(layered, layered_s), _result(layered, 0.0)],
    }
    (goal,) = list(reclaim_goals("w", by_seed))
    assert isinstance(goal, Goal)
    assert goal.met is met, goal.detail
