"""Kueue baseline: whole-workload admission, LowerPriority preemption, waitForPodsReady timeout + requeue."""

from __future__ import annotations

import pytest

from osprey.simulate import Kueue, KueueOsprey, Simulator
from osprey.simulate.runner import load_default_policy
from osprey.simulate.sim import JobRun
from tests.simulate.helpers import FirstTryStraggles, by_id, job, run, workload


def test_a_gang_is_admitted_whole_or_not_at_all() -> None:
    # Given 16 GPUs with an 8-GPU job running, when a 16-GPU gang arrives, then it takes no GPU at all until
    # both nodes are free (never half a gang), and a small job behind it is admitted at once (BestEffortFIFO).
    sim = run(workload(job("a", 0, 8, 1000), job("gang", 10, 16, 500), job("small", 20, 8, 100)), "kueue")
    times = by_id(sim)
    assert times["gang"][1] == 1000  # starts when "a" ends (small ends at 120)
    assert times["small"][0] == 0
    assert all(s.allocated_gpus <= 8 or s.training_gpus == 16 for s in sim.ledger.samples if s.time_s < 1000)
    assert sim.ledger.allocated_idle_gpu_s == 0  # nothing held idle waiting for the rest of a gang


def test_a_higher_priority_workload_preempts_a_lower_one_which_redoes_work_since_its_checkpoint() -> None:
    # Given a low-priority job on the whole cluster checkpointing every 1000 s, when a higher-priority job
    # arrives at 2500 s, then the low one is evicted (the last 500 s of its work are lost) and resumes after.
    low = job("low", 0, 16, 10_000, priority_class=0, checkpoint=1000)
    high = job("high", 2500, 8, 1000, priority_class=10)
    sim = run(workload(low, high), "kueue")
    times = by_id(sim)
    assert sim.preemptions == 1
    assert times["high"][1] == 2500
    assert times["low"][2] == pytest.approx(3500 + 8000)  # restarts at 3500 with 8,000 s of work left
    assert sim.ledger.wasted_gpu_s == pytest.approx(16 * 500)


def test_equal_priority_never_preempts() -> None:
    sim = run(workload(job("first", 0, 16, 1000), job("second", 10, 8, 100)), "kueue")
    assert sim.preemptions == 0
    assert by_id(sim)["second"][1] == 1000


def test_pods_not_ready_in_time_are_evicted_and_requeued_with_backoff() -> None:
    # Given workers that take 400 s to start on the first try (10 s after), when Kueue's 300 s
    # waitForPodsReady timeout passes, then the workload is evicted, backs off 60 s and starts again.
    scenario = workload(job("gang", 0, 16, 1000), startup=FirstTryStraggles())
    sim = run(scenario, Kueue())
    (gang,) = sim.runs
    assert gang.requeues == 1
    assert gang.first_train_s == pytest.approx(300 + 60 + 10)
    assert gang.queued_s == pytest.approx(60)  # the back-off counts as queueing
    assert sim.ledger.allocated_idle_gpu_s == pytest.approx(16 * (300 + 10))


def test_workloads_created_in_the_same_second_go_in_uid_order_as_real_kueue_orders_them() -> None:
    # Given one 8-GPU node held by "a" until 100 s, and "b" then "c" submitted within the same second
    scenario = workload(job("a", 0, 8, 100), job("b", 10.2, 8, 50), job("c", 10.7, 8, 50), nodes=(8,))
    # When the model knows no UIDs, then the tie on the whole-second creation time goes to submission order
    assert by_id(run(scenario, Kueue()))["b"][1] == 100
    # When it is given each Workload's creation second and UID (as a real run's), then the lower UID goes first
    # (Kueue v0.17 baseCompareFunc: priority, queue timestamp, UID)
    kueue = Kueue()
    kueue.workload_stamps = {"a": (0.0, "u-9"), "b": (10.0, "u-7"), "c": (10.0, "u-1")}
    times = by_id(run(scenario, kueue))
    assert (times["c"][1], times["b"][1]) == (100, 150)
    # And a creation one second earlier still wins over any UID
    kueue = Kueue()
    kueue.workload_stamps = {"a": (0.0, "u-9"), "b": (10.0, "u-7"), "c": (11.0, "u-1")}
    assert by_id(run(scenario, kueue))["b"][1] == 100


def test_kueue_acts_on_each_priority_write_as_it_lands_so_a_raise_written_first_can_preempt() -> None:
    # Given "running" admitted at its submitted priority (0) and "queued" waiting behind it on one node
    scenario = workload(job("running", 0, 8, 1000), job("queued", 1, 8, 100), nodes=(8,))
    scheduler = KueueOsprey(load_default_policy(), cycle_s=10)
    batches = iter([[("queued", 60), ("running", 90)]])

    def cycle(sim: Simulator, now: float) -> list[JobRun]:
        # One cycle at 10 s whose writes land in this order: "queued" raised to 60, then "running" to 90
        written = []
        for name, priority in next(batches, []) if now >= 10 else []:
            target = next(r for r in sim.runs if r.job.job_id == name)
            target.priority = priority
            written.append(target)
        return written

    scheduler.control.cycle = cycle  # type: ignore[method-assign]
    # When the simulation runs
    sim = run(scenario, scheduler)
    # Then Kueue preempted "running" the moment "queued" (600) outranked it (0), before its own raise landed,
    # as a real Kueue does between two PATCHes (bench/kueue_bench.py), and preempted "queued" back when that
    # raise (900) landed, in the same instant; with both writes applied at once neither would have happened
    assert sim.preemptions == 2
    times = by_id(sim)
    assert times["running"][2] == 1010  # it lost its first 10 s of work (no checkpoint) and started over
    assert times["queued"][1] == 1010
