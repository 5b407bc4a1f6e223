"""Slurm (sched/backfill, no preemption): the main scheduler stops at the first job it cannot start, and
backfill starts a lower-priority job only if it delays no reservation of a higher-priority one, judged by
time limits; with Osprey, each job's priority is the production Slurm applier's mapping of Osprey's, and until
Osprey's first write a job has the priority Osprey's job_submit.lua creates it with (the range's middle), or 1
on a cluster without the plugin."""

from __future__ import annotations

import pytest

from osprey.simulate import Simulator, Slurm, SlurmOsprey
from osprey_control.backends.slurm.applier import DEFAULT_SLURM_PRIORITY_RANGE
from tests.simulate.helpers import by_id, job, run, workload
from tests.simulate.test_layered import SHORT_FIRST, make_policy


def test_a_short_job_backfills_ahead_of_a_blocked_gang_only_when_its_limit_ends_before_the_gang_starts() -> (
    None
):
    # Given 16 GPUs, an 8-GPU job running until 1000 s (its limit), a 16-GPU gang waiting for it, and two
    # 8-GPU jobs behind the gang: one whose limit ends before 1000 s, one whose limit does not
    scenario = workload(
        job("running", 0, 8, 1000, declared=1000),
        job("gang", 10, 16, 500, declared=600),
        job("short", 20, 8, 300, declared=400),
        job("long", 30, 8, 300, declared=5000),
    )
    times = by_id(run(scenario, Slurm()))
    # Then the short one starts at once (it ends before the gang's reservation), the gang at 1000 s, and the
    # long one only after the gang, though its 300 s would have fitted: Slurm judges by the limit
    assert times["short"][1] == 20
    assert times["gang"][1] == 1000
    assert times["long"][1] == 1500


def test_a_gang_whose_window_lies_beyond_bf_window_gets_no_reservation_and_is_passed() -> None:
    # Given a gang whose GPUs free up at 1000 s and a job behind it whose limit ends after that
    scenario = workload(
        job("running", 0, 8, 1000, declared=1000),
        job("gang", 10, 16, 500, declared=600),
        job("long", 20, 8, 2000, declared=2000),
    )
    # When backfill looks 2000 s ahead, the gang is reserved and the long job waits for it; when it looks only
    # 600 s ahead, the gang has no reservation, the long job starts at once and the gang waits for both
    assert by_id(run(scenario, Slurm(bf_window_s=2000)))["long"][1] == 1500
    short_window = by_id(run(scenario, Slurm(bf_window_s=600)))
    assert short_window["long"][1] == 20
    assert short_window["gang"][1] == 2020


def test_without_backfill_nothing_passes_the_blocked_head() -> None:
    scenario = workload(job("running", 0, 8, 1000, declared=1000), job("gang", 10, 16, 500, declared=600),
                        job("short", 20, 8, 300, declared=400))  # fmt: skip
    times = by_id(run(scenario, Slurm(backfill=False)))
    assert times["short"][1] == 1500  # behind the gang, in priority (here submission) order


def test_a_job_without_a_time_limit_never_ends_as_far_as_backfill_knows() -> None:
    # Given a gang waiting for a job with a limit, and a small job with no limit (the partition's MaxTime)
    scenario = workload(
        job("running", 0, 8, 1000, declared=1000),
        job("gang", 10, 16, 500, declared=600),
        job("unlimited", 20, 8, 100),
    )
    times = by_id(run(scenario, Slurm()))
    # Then it does not start in front of the gang, however short it really is
    assert times["unlimited"][1] == 1500
    # And when no running job has a limit either, no reservation exists and it starts at once
    scenario = workload(job("running", 0, 8, 1000), job("gang", 10, 16, 500), job("unlimited", 20, 8, 100))
    assert by_id(run(scenario, Slurm()))["unlimited"][1] == 20


def test_without_priority_weights_jobs_go_in_submission_order_and_nothing_is_preempted() -> None:
    # Given ParallelCluster's slurm.conf (no priority weights): a job's class does not move it
    scenario = workload(
        job("running", 0, 16, 1000, declared=1000, priority_class=0),
        job("low", 10, 16, 100, declared=200, priority_class=0),
        job("high", 20, 16, 100, declared=200, priority_class=10),
    )
    sim = run(scenario, Slurm())
    times = by_id(sim)
    assert sim.preemptions == 0
    assert times["low"][1] == 1000
    assert times["high"][1] == 1100


def test_a_job_still_running_at_its_limit_ends_in_timeout() -> None:
    # Given a job that declares 500 s and needs 2000 s, and a gang waiting for its GPUs
    scenario = workload(job("over", 0, 8, 2000, declared=500), job("gang", 10, 16, 100, declared=200))
    sim = run(scenario, Slurm())
    over = next(r for r in sim.runs if r.job.job_id == "over")
    # Then slurmctld ends it at 500 s (failed), and the gang starts then
    assert over.status.value == "failed"
    assert over.end_s == 500
    assert by_id(sim)["gang"][1] == 500


def test_a_job_started_at_time_zero_keeps_its_end_for_backfill() -> None:
    # Given a job started at 0 s with a 1000 s limit, a gang waiting for it, and a job whose 985 s limit
    # would end after the gang's reservation (at 1000 s) if it started at 20 s
    scenario = workload(
        job("running", 0, 8, 1000, declared=1000),
        job("gang", 10, 16, 500, declared=600),
        job("late", 20, 8, 984, declared=985),
    )
    times = by_id(run(scenario, Slurm()))
    # Then it does not backfill in front of the gang (its end is judged from 0 s, not from now)
    assert times["gang"][1] == 1000
    assert times["late"][1] == 1500


def test_osprey_writes_the_production_slurm_priority_and_slurm_orders_by_it() -> None:
    # Given one 16-GPU cluster busy until 3000 s, then a long job and a short one, both with limits
    scenario = workload(
        job("running", 0, 16, 3000, declared=3600),
        job("long", 10, 16, 3000, declared=36000),
        job("short", 20, 16, 3000, declared=3600),
    )
    native = by_id(run(scenario, Slurm()))
    # When Osprey (shortest remaining time first) writes the jobs' priorities; the layering itself, without the
    # guard (which refuses this order: the long job would start later than native starts it)
    scheduler = SlurmOsprey(make_policy(rules=SHORT_FIRST), cycle_s=60, guard=False)
    sim = run(scenario, scheduler)
    layered = by_id(sim)
    # Then Slurm starts the short job first, which it did not on its own, and each job holds exactly the
    # value the production applier writes
    assert native["long"][1] < native["short"][1]
    assert layered["short"][1] < layered["long"][1]
    for r in sim.runs:
        assert r.priority is not None
        assert scheduler.priority(r) == DEFAULT_SLURM_PRIORITY_RANGE.map(r.priority)


def test_a_new_job_starts_where_ospreys_submit_plugin_puts_it_and_without_it_waits_at_the_bottom() -> None:
    # Given a cluster busy until 1000 s, a long job Osprey has ranked (shortest first: low), then a short new
    # one just before the GPUs free up, so Osprey's next cycle comes only after they have
    scenario = workload(
        job("running", 0, 16, 1000, declared=1000),
        job("ranked", 10, 16, 3000, declared=30000),
        job("new", 990, 16, 100, declared=200),
    )
    policy = make_policy(rules=SHORT_FIRST)
    # When the deployment is the documented one (job_submit.lua: new jobs mid-range), and a bare ParallelCluster
    # (the layering itself: without the guard, which tests/guard covers)
    documented = SlurmOsprey(policy, cycle_s=60, guard=False)
    bare = SlurmOsprey(policy, cycle_s=60, base_priority=1, guard=False)
    with_plugin, without = by_id(run(scenario, documented)), by_id(run(scenario, bare))
    # Then with the plugin the new short job, created mid-range above the low-ranked long one, takes the
    # GPUs at 1000 s; without it, created at 1, it waits for the long job
    assert with_plugin["new"][1] == 1000
    assert with_plugin["ranked"][1] == 1100
    assert without["ranked"][1] == 1000
    assert without["new"][1] == 4000
    # And an unwritten job holds the range's middle, the value the shipped job_submit.lua gives it
    unwritten = Simulator(scenario, SlurmOsprey(policy)).runs[2]
    assert SlurmOsprey(policy).priority(unwritten) == DEFAULT_SLURM_PRIORITY_RANGE.start == 5001
    assert SlurmOsprey(policy, base_priority=1).priority(unwritten) == 1


def _starts(sim: Simulator) -> dict[str, float | None]:
    return {r.job.job_id: r.allocated_s for r in sim.runs}


def test_with_a_scheduling_interval_a_submitted_job_waits_for_the_next_pass() -> None:
    # Given an idle cluster and one job submitted at t=0.3 (the last arrival, into an idle cluster)
    scenario = workload(job("a", 0.3, 8, 10, declared=60), job("b", 2.5, 8, 10, declared=60))
    # When Slurm's model schedules at every event, then the job starts as it arrives
    assert _starts(run(scenario, Slurm())) == {"a": 0.3, "b": 2.5}
    # When it schedules in passes a second apart (slurm.conf sched_interval=1), then the job waits for the pass
    # at t=1, as the real slurmctld starts a batch job at its next pass, and the second job for the pass at t=3
    assert _starts(run(scenario, Slurm(sched_interval_s=1.0))) == {"a": 1.0, "b": 3.0}
    # and a lone job waiting in an idle cluster for its pass is not taken for one that can never start
    assert _starts(run(workload(job("a", 0.3, 8, 10)), Slurm(sched_interval_s=1.0))) == {"a": 1.0}


def test_a_scheduling_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="sched_interval_s: must be > 0 seconds"):
        Slurm(sched_interval_s=0.0)
