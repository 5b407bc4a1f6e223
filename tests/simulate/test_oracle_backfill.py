"""The ``oracle-backfill`` reference: EASY backfilling with exact run times on the oracle's order (least
remaining GPU-time first). The first job in that order that cannot be placed (the head) is reserved the
instant the exactly known ends make room for it (its shadow time); a later job starts now only if it ends by
then or leaves the head placeable beside it. Fit is judged on nodes, so a fragmented cluster neither makes a
shadow time out of scattered GPUs nor lets a job take a node the head needs.

In the hand-made cases every worker starts at once (no startup delay), so a job trains from the instant it
is placed, and each expected time follows from the durations alone."""

from __future__ import annotations

import pytest

from osprey.simulate import (
    SCHEDULERS,
    JobRun,
    OracleBackfill,
    Simulator,
    llm_workload,
    make_scheduler,
    simulate,
)
from tests.simulate.helpers import by_id, job, run, workload

HOUR = 3600.0


def _start(sim: Simulator, job_id: str) -> float:
    return by_id(sim)[job_id][1]


def test_it_is_a_scheduler_the_runner_and_the_cli_know_by_name() -> None:
    assert "oracle-backfill" in SCHEDULERS
    assert isinstance(make_scheduler("oracle-backfill"), OracleBackfill)


@pytest.mark.parametrize(
    ("duration", "starts_at"),
    [
        (3 * HOUR, 20.0),  # ends at 3 h: long before the gang's shadow time (10 h)
        (10 * HOUR - 20, 20.0),  # ends exactly at the shadow time: its GPUs are free when the gang starts
        (10 * HOUR - 19, 11 * HOUR),  # one second later: it waits until the gang has run (10 h + 1 h)
    ],
)
def test_a_job_is_backfilled_in_front_of_a_blocked_gang_only_when_it_ends_by_the_gang_shadow_time(
    duration: float, starts_at: float
) -> None:
    # Given 16 GPUs, an 8-GPU job running until 10 h, a 16-GPU 1-hour gang waiting for it (16 GPU-hours,
    # the least in the queue, so it is the head) and an 8-GPU job behind it (at least 24 GPU-hours) that fits
    # now on the free node
    scenario = workload(
        job("running", 0, 8, 10 * HOUR),
        job("gang", 10, 16, HOUR),
        job("behind", 20, 8, duration),
    )
    sim = run(scenario, "oracle-backfill")
    # Then the job behind starts at once only if it ends by 10 h (a tie counts: releases come first), and the
    # gang starts at its shadow time either way
    assert _start(sim, "behind") == starts_at
    assert _start(sim, "gang") == 10 * HOUR


def test_a_job_that_would_delay_the_head_waits_where_the_oracle_would_start_it() -> None:
    # Given the same gang waiting for 10 h and a 12-hour 8-GPU job behind it: it fits now, would still run
    # at 10 h, and at 10 h the gang needs every GPU (no extra)
    scenario = workload(
        job("running", 0, 8, 10 * HOUR),
        job("gang", 10, 16, HOUR),
        job("long", 20, 8, 12 * HOUR),
    )
    backfill = run(scenario, "oracle-backfill")
    greedy = run(scenario, "oracle")
    # Then oracle-backfill keeps the gang's reservation: the gang at 10 h, the long job after it (11 h)
    assert _start(backfill, "gang") == 10 * HOUR
    assert _start(backfill, "long") == 11 * HOUR
    # ... where the oracle, which starts whatever fits, starts the long job at once and the gang waits for it
    assert _start(greedy, "long") == 20
    assert _start(greedy, "gang") == 20 + 12 * HOUR


def test_a_job_that_outlasts_the_shadow_time_is_backfilled_when_it_fits_in_the_extra_gpus() -> None:
    # Given 24 GPUs (three nodes), a 16-GPU job holding two nodes until 10 h and a 16-GPU gang waiting for
    # them: at 10 h 24 GPUs are free, 8 more than the gang needs
    scenario = workload(
        job("running", 0, 16, 10 * HOUR),
        job("gang", 10, 16, HOUR),
        job("long", 20, 8, 12 * HOUR),
        nodes=(8, 8, 8),
    )
    sim = run(scenario, "oracle-backfill")
    # Then the 12-hour job starts at once on the third node (the extra) and the gang still starts at 10 h
    assert _start(sim, "long") == 20
    assert _start(sim, "gang") == 10 * HOUR


def _fragmented(*behind: tuple[str, float, int, float]) -> Simulator:
    """Three 8-GPU nodes left as node 0: 4 GPUs free (the rest until 10 h), node 1: full until 5 h, node 2:
    4 GPUs free (the rest until 20 h); a 16-GPU 1-hour gang submitted at 4000 s, which needs two whole nodes,
    first free together at 10 h when node 0 empties (at 5 h 16 GPUs are free, but over three nodes); then
    ``behind``, run under oracle-backfill."""
    scenario = workload(
        job("a", 0, 4, 10 * HOUR),  # best fit on an empty cluster: node 0
        job("filler", 1, 4, HOUR),  # best fit: the rest of node 0, free again at 1 h
        job("c", 2, 8, 5 * HOUR),  # node 1
        job("e", 3, 4, 20 * HOUR),  # no node has exactly 4 free: node 2
        job("gang", 4000, 16, HOUR),
        *(job(job_id, submit, gpus, duration) for job_id, submit, gpus, duration in behind),
        nodes=(8, 8, 8),
    )
    return run(scenario, "oracle-backfill")


def test_the_shadow_time_is_when_the_gang_can_be_placed_not_when_enough_gpus_are_free() -> None:
    # Given the fragmented cluster and a 4-GPU job behind the gang that would run until 30000 s: after 5 h
    # (counted GPUs would make that the shadow time) but before 10 h, when the gang can be placed
    sim = _fragmented(("short", 5000, 4, 25000))
    # Then it starts at once, and the gang still starts at 10 h
    assert _start(sim, "short") == 5000
    assert _start(sim, "gang") == 10 * HOUR


def test_a_job_within_the_extra_gpu_count_waits_when_it_would_land_on_a_node_the_gang_needs() -> None:
    # Given the fragmented cluster and a 30-hour 4-GPU job behind the gang: at 10 h 20 GPUs are free, 4 more
    # than the gang's 16, but the cluster's best fit would put the job on node 0, one of the two nodes the
    # gang needs then
    sim = _fragmented(("long", 5000, 4, 30 * HOUR))
    # Then the job waits, and the gang starts at 10 h on nodes 0 and 1 with the job beside it on node 2
    assert _start(sim, "gang") == 10 * HOUR
    assert _start(sim, "long") == 10 * HOUR
    # ... where the oracle, counting GPUs, starts the job at once on node 0, and the gang waits until node 2
    # empties at 20 h
    greedy = by_id(run(sim.workload, "oracle"))
    assert greedy["long"][1] == 5000
    assert greedy["gang"][1] == 3 + 20 * HOUR


class _Checked(OracleBackfill):
    """Records, at each pass that has a head, its shadow time before and after the jobs behind it were
    started, how many were started, and the end it counted on for each running job."""

    def __init__(self) -> None:
        self.passes: list[tuple[float, float, int]] = []
        self.predicted_ends: dict[int, set[float]] = {}

    def _backfill(self, head: JobRun, behind: list[JobRun], now: float) -> None:
        for started in self.sim.running.values():
            self.predicted_ends.setdefault(started.index, set()).add(self._end(started))
        before = self._shadow(head)
        running = len(self.sim.running)
        super()._backfill(head, behind, now)
        after = self._shadow(head)
        if before is not None and after is not None:
            self.passes.append((before[0], after[0], len(self.sim.running) - running))


def test_on_llm_gangs_no_backfilled_job_ever_moves_the_head_and_waits_stay_near_the_oracle() -> None:
    # Given 150 LLM gangs at load 1.3, with their startup delays and stragglers (ends are exact only if the
    # scheduler knows those too)
    scenario = llm_workload(seed=0, jobs=150, load=1.3)
    checked = _Checked()
    sim = Simulator(scenario, checked, seed=0)
    sim.run()
    # Then every end it counted on was the job's real end, to the float
    assert checked.predicted_ends
    assert all(ends == {sim.runs[index].end_s} for index, ends in checked.predicted_ends.items())
    # ... jobs were backfilled, and no pass moved its head's shadow time by a second
    assert sum(started for *_, started in checked.passes) > 0
    assert all(before == after for before, after, _ in checked.passes)
    # ... every job ran to completion (nothing is preempted or timed out)
    assert all(r.end_s is not None and r.work_done_s == r.job.duration_s for r in sim.runs)
    # ... and its mean wait is far below submission order's and within half again of the oracle's, which
    # never holds GPUs back for a reservation
    backfill, oracle, fifo = (
        simulate(scenario, name, seed=0) for name in ("oracle-backfill", "oracle", "fifo")
    )
    assert backfill.mean_wait_s < fifo.mean_wait_s / 2
    assert backfill.mean_wait_s <= 1.5 * oracle.mean_wait_s


def test_the_same_workload_and_seed_give_the_same_run() -> None:
    scenario = llm_workload(seed=3, jobs=80, load=1.3)
    first, second = (simulate(scenario, "oracle-backfill", seed=3) for _ in range(2))
    assert first.to_dict() == second.to_dict()
    assert first.waits_s == second.waits_s
