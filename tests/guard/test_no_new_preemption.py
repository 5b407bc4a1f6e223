"""No new preemption (docs/guard.md): on Kueue, under the policy's order, a running job is held at least as high as
any queued work its native place protects it from, so Kueue preempts only where its classes would, or where
the plan lets a young job yield; and a guard that switches between orders no longer preempts on every switch."""

from __future__ import annotations

from collections.abc import Hashable

from osprey.simulate import family_workload, make_scheduler, simulate
from osprey_control.derivation import (
    JobMetrics,
    Reservation,
    ReservationRole,
    compile_policy,
    derive,
)
from osprey_control.guard import (
    NATIVE,
    POLICY,
    GuardJob,
    GuardVerdict,
    LookJob,
    build_candidates,
    native_priority,
    priority_floors,
    realize,
    unwritten_priority,
)
from osprey_control.policy import DEFAULT_POLICY_NAME, load_policies, shipped_policy_file

COMPILED = compile_policy(load_policies([shipped_policy_file(DEFAULT_POLICY_NAME)])[0])


PRIORITY: dict[Hashable, float] = {
    "running-default": 30.0,
    "running-top": 20.0,
    "queued-default": 60.0,
    "queued-top": 90.0,
}


def job(key: str, *, running: bool, native: int) -> GuardJob:
    look = LookJob(key, 8, running, 3600.0)
    # No metrics: the policy keeps each job at its last priority (PRIORITY), so the candidates' are known.
    return GuardJob(look, JobMetrics(key), COMPILED, int(PRIORITY[key]), native)


# A running job of the default class (native 55), one of the top class (native 100), and queued work of both.
POOL = [
    job("running-default", running=True, native=55),
    job("running-top", running=True, native=100),
    job("queued-default", running=False, native=55),
    job("queued-top", running=False, native=100),
]


def test_a_running_job_is_held_above_queued_work_of_its_class_or_lower_only() -> None:
    # When the floors are computed for the policy's priorities
    floors = priority_floors(POOL, PRIORITY, None)
    # Then the default-class job is held at the default-class queued job's 60, not at the top-class job's 90
    # (native Kueue lets a higher class preempt it), and the top-class job above everything queued
    assert floors == {"running-default": 60.0, "running-top": 90.0}


def test_a_job_the_plan_lets_yield_is_not_held() -> None:
    plan: dict[Hashable, Reservation] = {
        "running-default": Reservation(ReservationRole.YIELDS, "queued-default", 0.0)
    }
    assert "running-default" not in priority_floors(POOL, PRIORITY, plan)


def test_predicted_arrivals_count_as_queued_work() -> None:
    floors = priority_floors(
        POOL[:2], {"running-default": 30.0, "running-top": 95.0}, None, arrival=(50.0, 55)
    )
    assert floors == {"running-default": 50.0}


def test_the_engine_reaches_the_floor_at_once_and_says_held() -> None:
    # Given a job 40 points below its floor, with damping that moves at most a few points a cycle
    metrics = JobMetrics("j", priority_floor=70)
    # When it is derived
    decision = derive(COMPILED, metrics, 30)
    # Then it is at the floor this cycle, for the reason "held"; a job already above its floor is untouched
    assert (decision.priority, decision.reason) == (70, "held")
    assert derive(COMPILED, JobMetrics("j", priority_floor=10), 30).reason != "held"


def test_only_kueue_candidates_and_realizations_are_held() -> None:
    kueue = {c.name: c for c in build_candidates(POOL, {}, model="kueue")}
    slurm = {c.name: c for c in build_candidates(POOL, {}, model="slurm")}
    held = kueue[POLICY].priority
    assert all(held[r] >= held["queued-default"] for r in ("running-default", "running-top"))
    unheld = {c.name: c for c in build_candidates(POOL, {})}
    # Slurm does not preempt by priority: its candidate is the policy's priorities as derived
    assert slurm[POLICY].priority == unheld[POLICY].priority != held
    chose_policy = GuardVerdict(POLICY, "test", (), 3600.0, 1)
    stood_down = GuardVerdict(NATIVE, "test", (), 3600.0, 1)
    on_kueue = realize(chose_policy, POOL, {}, model="kueue")
    assert all(on_kueue[key].priority_floor is None for key in ("queued-default", "queued-top"))
    assert all(m.priority_floor is None for m in realize(chose_policy, POOL, {}, model="slurm").values())
    assert all(m.priority_floor is None for m in realize(stood_down, POOL, {}, model="kueue").values())


def test_a_guard_switching_orders_on_kueue_does_not_multiply_preemptions() -> None:
    # Given a dev draw of the family (never a reported one) on which, before holding running jobs, every switch
    # between the native and the policy's order preempted jobs: 683 preemptions against native Kueue's 10, and
    # 17 % of the goodput lost
    workload = family_workload(5004)
    # When it runs under native Kueue and under Kueue with Osprey and its guard
    native = simulate(workload, "kueue")
    layered = simulate(workload, make_scheduler("kueue+osprey"))
    # Then Osprey preempts about as often as Kueue alone, and loses no goodput
    assert layered.preemptions <= 2 * native.preemptions + 5
    assert layered.goodput >= 0.99 * native.goodput


def test_a_running_job_stays_above_an_arrival_of_its_own_class_that_osprey_has_not_written() -> None:
    # Given a running job of the top class (class value 1000) that the policy places at 20, with nothing queued
    # above it: a new Workload of the same class holds its class value, 1000, until Osprey's next cycle
    running = GuardJob(
        LookJob("running-top", 8, True, 3600.0),
        JobMetrics("running-top"),
        COMPILED,
        20,
        native_priority("kueue", 1000),
        unwritten_priority("kueue", 1000),
    )
    # When its floor is computed
    floors = priority_floors([running], {"running-top": 20.0}, None)
    # Then it is held at that value (Osprey's 100), so the arrival cannot preempt it where native Kueue's equal
    # classes would not
    assert floors == {"running-top": 100.0}
    # and only Kueue's classes hold a value outside Osprey's band
    assert unwritten_priority("kueue", 100) == 10.0
    assert unwritten_priority("slurm", 1000) is None
    assert unwritten_priority("kueue", None) is None


def test_a_dev_draw_where_unwritten_arrivals_preempted_running_jobs_of_their_class_loses_no_goodput() -> None:
    # Given a dev draw (never a reported one) on which a Workload of class 1000, arriving between two cycles at its
    # class value, preempted a running class-1000 job the policy had placed at 850; and the next cycle, lowering
    # the new job to 800 before anything else, let the victim preempt it back (goodput 0.971 x native, all of it
    # checkpoint loss)
    workload = family_workload(5018)
    # When it runs under native Kueue and under Kueue with Osprey
    native = simulate(workload, "kueue")
    layered = simulate(workload, make_scheduler("kueue+osprey"))
    # Then Osprey loses no goodput and preempts about as often as Kueue alone
    assert layered.goodput >= 0.99 * native.goodput
    assert layered.preemptions <= native.preemptions + 3


def _running(key: str, held_s: float, native: int = 10) -> GuardJob:
    return GuardJob(LookJob(key, 8, True, 3600.0, waited_s=held_s), JobMetrics(key), COMPILED, 0, native)


def test_a_running_job_is_held_at_least_as_high_as_the_jobs_of_its_class_admitted_after_it() -> None:
    # Given three running jobs of one class, the policy ranking the one admitted first lowest, and one of another
    # class admitted last, ranked highest
    jobs = [
        _running("oldest", 7200.0),
        _running("middle", 3600.0),
        _running("newest", 600.0),
        _running("other-class", 60.0, native=100),
    ]
    priority: dict[Hashable, float] = {"oldest": 20.0, "middle": 70.0, "newest": 40.0, "other-class": 95.0}
    # When the floors are computed
    floors = priority_floors(jobs, priority, None)
    # Then within the class no job ranks below one admitted after it, so a preemption among them takes the most
    # recently admitted first, as native Kueue's equal priorities do; the other class is not compared
    assert floors == {"oldest": 70.0}


def test_a_yielding_job_is_left_out_of_its_class_victim_order() -> None:
    jobs = [_running("oldest", 7200.0), _running("newest", 600.0)]
    plan: dict[Hashable, Reservation] = {"oldest": Reservation(ReservationRole.YIELDS, "queued", 0.0)}
    assert priority_floors(jobs, {"oldest": 20.0, "newest": 40.0}, plan) == {}


def test_a_dev_draw_where_a_higher_class_preempted_a_long_running_job_loses_no_goodput() -> None:
    # Given a dev draw (never a reported one) on which the policy ranked a 64-GPU job, running for 2.2 h without
    # checkpoints, below younger jobs of its class, so that a class-1000 arrival preempted it rather than the
    # youngest of them, as native Kueue would (141 GPU-hours thrown away, goodput 0.896 x native)
    workload = family_workload(5016)
    # When it runs under native Kueue and under Kueue with Osprey
    native = simulate(workload, "kueue")
    layered = simulate(workload, make_scheduler("kueue+osprey"))
    # Then Osprey loses no goodput
    assert layered.goodput >= 0.99 * native.goodput
