"""Given a cycle's active jobs in several pools, when the collect step runs the guard over them, then a pool whose
policy order is predicted to idle GPUs stands down (every job pinned at its native priority, derived as
``guarded``), a pool where the policy's order qualifies keeps it, each job's notes say why, a pool the guard
cannot or may not run for says so and is left alone, one pool's failure leaves only that pool as it was, and
the order chosen last cycle is read back from the registry's decisions."""

from __future__ import annotations

from typing import Any

import pytest

import osprey_control.metrics.guard as guard_module
from osprey_control.derivation import compile_policy, derive
from osprey_control.guard import GUARD_NOTE, Model, choose_order
from osprey_control.metrics import add_guard, add_reservations, pool_bound_ms
from osprey_control.policy import load_policy_text
from osprey_control.registry import Backend, JobRecord
from osprey_control.telemetry import guard_metrics
from osprey_control.wiring import GUARD_CYCLE_NOTE, GUARD_ORDER_NOTE, GUARD_SIGNATURE_NOTE
from tests.control.metrics.guard_pools import (
    NATIVE,
    POLICY_TEXT,
    QUEUE_POOL,
    Policies,
    collected,
    compiled,
    fragmenting,
    head_blocked,
    job,
    whole,
)
from tests.control.metrics.helpers import NOW


def _by_name(records: list[JobRecord]) -> dict[str, JobRecord]:
    return {record.name: record for record in records}


def test_a_pool_whose_policy_order_would_idle_gpus_stands_down_to_its_native_order() -> None:
    # Given the fragmenting pool (guard_pools): shortest first leaves 4, then 8, GPUs idle for up to 2 h
    records = fragmenting()
    result = collected(records)
    policies = Policies(compiled())

    # When the collect step runs the guard
    [pool] = add_guard(records, result, policies, now=NOW)

    # Then the pool stood down, and every job is pinned at its native priority
    assert (pool.backend, pool.pool, pool.chosen, pool.stood_down) == ("eks", "gpu", "native", True)
    assert {r.name: result.metrics[r.key].pinned_priority for r in records} == dict.fromkeys(
        ("w-running", "r-big", "p-short", "q-medium"), NATIVE
    )
    # And the derivation writes exactly that priority, for the reason "guarded", whatever the policy says
    short = _by_name(records)["p-short"]
    decision = derive(policies.get("shortest"), result.metrics[short.key], None)
    assert (decision.priority, decision.reason) == (NATIVE, "guarded")
    # And the job's notes explain it: the verdict, each candidate's predicted wait and goodput
    note = result.metrics[short.key].notes[GUARD_NOTE]
    assert note.startswith("stood down to the native order: policy would lose goodput in some draw")
    assert "native: wait" in note
    assert "policy: wait" in note
    assert "(would lose goodput)" in note
    assert result.metrics[short.key].notes[GUARD_ORDER_NOTE] == "native"
    assert result.metrics[short.key].notes[GUARD_CYCLE_NOTE] == "2026-12-02T12:00:00.000Z"


def test_a_pool_where_the_policy_order_qualifies_keeps_the_policys_priorities() -> None:
    # Given the head-blocked queue: shortest first runs the short job on GPUs native leaves free behind the gang
    records = head_blocked()
    result = collected(records)
    policies = Policies(compiled())

    # When the guard runs
    [pool] = add_guard(records, result, policies, now=NOW)

    # Then it chose the policy's order: nothing pinned, and the short job derives above the gang
    assert (pool.backend, pool.pool, pool.chosen, pool.stood_down) == (
        "sagemaker-queued",
        QUEUE_POOL,
        "policy",
        False,
    )
    derived = {r.name: derive(policies.get("shortest"), result.metrics[r.key], None) for r in records}
    assert all(result.metrics[r.key].pinned_priority is None for r in records)
    assert derived["c-short"].priority > derived["b-gang"].priority
    assert {decision.reason for decision in derived.values()} == {"derived"}
    note = result.metrics[records[0].key].notes[GUARD_NOTE]
    assert note.startswith("chose policy: waits least")
    assert "loses no goodput and starts no job later than native in any draw" in note


def test_an_order_that_would_start_a_job_later_than_native_is_refused_and_says_so() -> None:
    # Given the whole-node pool: shortest first waits far less but starts the 5-hour job 30 minutes later
    records = whole()
    result = collected(records)

    # When the guard runs
    [pool] = add_guard(records, result, Policies(compiled()), now=NOW)

    # Then the pool stands down, and the job's notes say which rule refused the policy's order
    assert (pool.chosen, pool.stood_down) == ("native", True)
    note = result.metrics[records[0].key].notes[GUARD_NOTE]
    assert "policy would start 1 job later than native" in note
    assert "(would start 1 job later than native)" in note


@pytest.mark.parametrize("out_of_time", [False, True])
def test_the_guard_does_not_run_where_it_cannot_or_may_not_and_says_why(out_of_time: bool) -> None:
    # Given a pool whose policy declares no capacity, one whose policy disables the guard, and a SageMaker job
    # (no priority of its own to stand down to); with or without time left in the collect step (a pool the guard
    # is not for is left alone either way: running out of time stands down only pools it would look ahead)
    unknown = whole(cluster="unknown-gpus", policy="no-capacity")
    disabled = whole(cluster="opted-out", policy="no-guard")
    direct = job("direct", gpus=8, hours=1, submitted_min_ago=5, backend=Backend.SAGEMAKER, native=None)
    records = [*unknown, *disabled, direct]
    result = collected(records)
    policies = Policies(
        compiled("no-capacity", extra=""),
        compiled("no-guard", extra="  reservation: {capacityGpus: 16}\n  guard: {enabled: false}"),
    )

    # When the guard runs
    verdicts = add_guard(
        records, result, policies, now=NOW, allows=(lambda _: False) if out_of_time else None
    )

    # Then neither pool is guarded, and each job's notes say what to do about it
    assert [(v.pool, v.skipped) for v in verdicts] == [
        ("opted-out", "disabled"),
        ("unknown-gpus", "capacity unknown"),
    ]
    assert result.metrics[unknown[0].key].notes[GUARD_NOTE] == (
        "not guarded: the pool's GPUs are unknown; set spec.reservation.capacityGpus in no-capacity to the GPUs of "
        "this cluster or queue"
    )
    assert result.metrics[disabled[0].key].notes[GUARD_NOTE] == (
        "not guarded: spec.guard.enabled is false in no-guard"
    )
    assert all(result.metrics[r.key].pinned_priority is None for r in records)
    # And the SageMaker job is untouched
    assert dict(result.metrics[direct.key].notes) == {}
    # And none of them is counted as a guarded pool
    assert guard_metrics(verdicts) == []


def test_a_job_of_unknown_size_keeps_its_native_place_with_its_pool() -> None:
    # Given the fragmenting pool plus a queued job whose GPUs are unknown (it cannot be placed in the lookahead)
    records = [*fragmenting(), job("unsized", gpus=None, hours=1, submitted_min_ago=5)]
    result = collected(records)
    # When the pool stands down
    [pool] = add_guard(records, result, Policies(compiled()), now=NOW)
    assert pool.stood_down
    # Then that job is pinned at its native priority too, with the same verdict
    unsized = result.metrics[records[-1].key]
    assert unsized.pinned_priority == NATIVE
    assert unsized.notes[GUARD_NOTE] == result.metrics[records[0].key].notes[GUARD_NOTE]


def test_one_pools_failure_leaves_that_pool_as_it_was_and_the_others_guarded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given two pools, and a guard that fails for one of them
    broken, healthy = fragmenting(cluster="broken"), head_blocked()
    records = [*broken, *healthy]
    result = collected(records)
    before = {r.key: result.metrics[r.key] for r in broken}
    choose = choose_order

    def failing(model: Any, pool: Any, candidates: Any, **options: Any) -> Any:
        if any(getattr(j.key, "native_id", "").startswith("broken/") for j in pool.jobs):
            raise RuntimeError("lookahead exploded")
        return choose(model, pool, candidates, **options)

    monkeypatch.setattr(guard_module, "choose_order", failing)

    # When the guard runs
    verdicts = {v.pool: v for v in add_guard(records, result, Policies(compiled()), now=NOW)}

    # Then the failing pool's jobs keep exactly what was collected (the policy's order), and it is counted
    assert {r.key: result.metrics[r.key] for r in broken} == before
    assert verdicts["broken"].failed
    assert "lookahead exploded" in (verdicts["broken"].error or "")
    # And the other pool got its verdict
    assert verdicts[QUEUE_POOL].chosen == "policy"
    points = {(p.name, p.dimensions["Backend"]): p.values for p in guard_metrics(list(verdicts.values()))}
    assert points[("GuardFailures", "eks")] == (1.0,)
    assert points[("GuardEvaluations", "eks")] == (0.0,)
    assert points[("GuardEvaluations", "sagemaker-queued")] == (1.0,)
    assert points[("GuardStoodDown", "sagemaker-queued")] == (0.0,)


def test_last_cycles_order_is_read_back_from_the_newest_recorded_decision() -> None:
    # Given a pool whose policy reads the reservation signal (its candidates: the policy with and without it,
    # predicted to wait the same here), and whose newest recorded decision says the guard chose
    # policy-no-reservation (an older one says native)
    rule = "  - {{metric: reservation, weight: 0.01, scaling: linear, minPriority: 0, maxPriority: 100}}\n"
    text = POLICY_TEXT.replace("  maxPriorityChange", rule + "  maxPriorityChange")
    document = load_policy_text(
        text.format(name="shortest", extra="  reservation: {capacityGpus: 16}"), "p.yaml"
    )
    policies = Policies(compile_policy(document.policies[0].policy))
    _running, older, newer = head_blocked()

    def decided(record: JobRecord, order: str, at: str) -> JobRecord:
        notes = {GUARD_ORDER_NOTE: order, GUARD_CYCLE_NOTE: at}
        return record.model_copy(update={"last_decision": {"reason": "derived", "inputs": {"notes": notes}}})

    records = [
        _running,
        decided(older, "native", "2026-12-02T11:00:00.000Z"),
        decided(newer, "policy-no-reservation", "2026-12-02T11:59:00.000Z"),
    ]
    result = collected(records)
    add_reservations(records, result, policies, now=NOW)

    # When the guard runs
    [pool] = add_guard(records, result, policies, now=NOW)

    # Then it keeps that order (switching costs every job a priority change), and says so
    assert pool.chosen == "policy-no-reservation"
    assert "kept last cycle's order" in result.metrics[newer.key].notes[GUARD_NOTE]
    # And each job's reservation value is that order's: the signal neutral
    assert {result.metrics[r.key].job_values["reservation"] for r in records} == {0.5}


def test_a_pool_derived_before_the_guard_keeps_the_policys_order_on_a_tie() -> None:
    # Given a pool of one running job, for which every order predicts the same, derived under the policy before
    # the guard ran for it (its last decision carries no verdict)
    running = job("solo", gpus=8, hours=5, submitted_min_ago=120, running_for_min=100)
    derived = running.model_copy(update={"last_decision": {"reason": "derived", "priority": 60}})
    policies = Policies(compiled())
    # When the guard runs for the first time
    [kept] = add_guard([derived], collected([derived]), policies, now=NOW)
    # Then the policy's order, in force until now, stays: a tie is no reason to move every job
    assert kept.chosen == "policy"
    # And a pool never derived has no order to keep: the tie goes to the native order
    [fresh] = add_guard([running], collected([running]), policies, now=NOW)
    assert fresh.chosen == "native"


def test_a_pool_of_jobs_of_unknown_size_is_not_guarded() -> None:
    records = [
        job("a", gpus=None, hours=1, submitted_min_ago=5),
        job("b", gpus=None, hours=2, submitted_min_ago=3),
    ]
    result = collected(records)
    [pool] = add_guard(records, result, Policies(compiled()), now=NOW)
    assert pool.skipped == "sizes unknown"
    assert result.metrics[records[0].key].notes[GUARD_NOTE] == (
        "not guarded: no job of this pool has a known GPU count, so no order can be predicted"
    )
    assert all(result.metrics[r.key].pinned_priority is None for r in records)


def test_a_pool_too_large_to_look_ahead_in_time_stands_down_to_its_native_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a lookahead limit below the fragmenting pool's 4 jobs and their 4 echoed arrivals
    monkeypatch.setattr(guard_module, "LOOKAHEAD_LIMITS", dict.fromkeys(guard_module.LOOKAHEAD_LIMITS, 7))

    def no_lookahead(*_: Any, **__: Any) -> Any:
        raise AssertionError("the lookahead ran for a pool too large for it")

    monkeypatch.setattr(guard_module, "choose_order", no_lookahead)
    records = fragmenting()
    result = collected(records)
    policies = Policies(compiled())
    # When the guard runs
    [pool] = add_guard(records, result, policies, now=NOW)
    # Then no order is run forward, so none is known to lose no goodput: the pool keeps its native order
    assert (pool.chosen, pool.stood_down) == ("native", True)
    assert {r.name: result.metrics[r.key].pinned_priority for r in records} == dict.fromkeys(
        ("w-running", "r-big", "p-short", "q-medium"), NATIVE
    )
    short = _by_name(records)["p-short"]
    decision = derive(policies.get("shortest"), result.metrics[short.key], None)
    assert (decision.priority, decision.reason) == (NATIVE, "guarded")
    # And its jobs say why, and the cycle counts the pool as stood down
    assert result.metrics[records[0].key].notes[GUARD_NOTE] == (
        "stood down to the native order: not looked ahead: 4 jobs and 4 predicted arrivals, more than the 7 "
        "the lookahead runs on kueue within the collect step's time"
    )
    assert result.metrics[records[0].key].notes[GUARD_ORDER_NOTE] == "native"
    stood = next(point for point in guard_metrics([pool]) if point.name == "GuardStoodDown")
    assert stood.values == (1.0,)


def test_pools_are_guarded_smallest_first_while_the_step_has_time() -> None:
    # Given two pools and a collect step with time for one pool only
    small, large = head_blocked(), fragmenting()
    records = [*large, *small]
    result = collected(records)
    budget = [True]

    def allows(needed_ms: float) -> bool:
        assert needed_ms > 0
        return budget.pop() if budget else False

    # When the guard runs
    verdicts = add_guard(records, result, Policies(compiled()), now=NOW, allows=allows)

    # Then the smaller pool got its verdict, and the other, not looked ahead, keeps its native order, saying why
    assert [(v.pool, v.chosen, v.skipped) for v in verdicts] == [
        (QUEUE_POOL, "policy", None),
        ("gpu", "native", "out of time"),
    ]
    assert result.metrics[large[0].key].notes[GUARD_NOTE] == (
        "stood down to the native order: not looked ahead: the collect step's time ran out before this pool"
    )
    assert all(result.metrics[r.key].pinned_priority == NATIVE for r in large)
    # And the stand-down is recorded (osprey report counts it), under a signature no pool matches, so the next
    # cycle looks the pool ahead if it has the time
    notes = result.metrics[large[0].key].notes
    assert (notes[GUARD_ORDER_NOTE], notes[GUARD_SIGNATURE_NOTE]) == ("native", guard_module.UNJUDGED)


def test_the_time_kept_for_a_pool_is_what_its_model_costs_at_its_size() -> None:
    # Given two pools and a collect step that records the time each pool asks for
    small, large = head_blocked(), fragmenting()
    records = [*large, *small]
    asked: list[float] = []

    def allows(needed_ms: float) -> bool:
        asked.append(needed_ms)
        return True

    # When the guard runs
    verdicts = add_guard(records, collected(records), Policies(compiled()), now=NOW, allows=allows)
    # Then each pool asked for its model's bound at its size, smallest pool first (a SageMaker queue, then EKS)
    assert [v.jobs for v in verdicts] == [3, 4]
    assert asked == [pool_bound_ms(Model.SAGEMAKER_QUEUE, 3), pool_bound_ms(Model.KUEUE, 4)]
    # And the bound grows with the pool past the floor, faster on Slurm's backfill than on Kueue, and a pool at the
    # limit Kueue is looked ahead at (10,000 jobs and their echoed arrivals) fits the collect step's 60 s
    assert pool_bound_ms(Model.KUEUE, 2) == guard_module.POOL_BOUND_MS
    assert pool_bound_ms(Model.SLURM, 300) > pool_bound_ms(Model.KUEUE, 300)
    assert pool_bound_ms(Model.KUEUE, 12_000) < 60_000 > pool_bound_ms(Model.SLURM, 300)


def _as_decided(records: list[JobRecord], result: Any) -> list[JobRecord]:
    """The records as the derive step leaves them: each decision with the collected notes in its inputs."""
    return [
        record.model_copy(
            update={
                "last_decision": {
                    "reason": "derived",
                    "inputs": {"notes": dict(result.metrics[record.key].notes)},
                }
            }
        )
        for record in records
    ]


def test_a_verdict_stands_while_the_pool_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the fragmenting pool's verdict, recorded in its jobs' decisions
    records = fragmenting()
    first = collected(records)
    [before] = add_guard(records, first, Policies(compiled()), now=NOW)
    decided = _as_decided(records, first)

    def no_lookahead(*_: Any, **__: Any) -> Any:
        raise AssertionError("the lookahead ran for a pool that had not changed")

    monkeypatch.setattr(guard_module, "choose_order", no_lookahead)
    # When the next cycle finds the same jobs, running and queued as they were
    later = NOW.replace(minute=1)
    again = collected(decided, later)
    [after] = add_guard(decided, again, Policies(compiled()), now=later)
    # Then the verdict stands without running the lookahead, with the text the user saw
    assert (after.chosen, after.stood_down) == ("native", True)
    assert after.verdict is not None
    assert after.verdict.reason == "the pool has not changed since this order was chosen"
    note = first.metrics[records[0].key].notes[GUARD_NOTE]
    assert {again.metrics[r.key].notes[GUARD_NOTE] for r in decided} == {note}
    assert {again.metrics[r.key].pinned_priority for r in decided} == {NATIVE}
    assert before.chosen == after.chosen


def test_a_pool_that_changed_is_judged_again() -> None:
    # Given the fragmenting pool's recorded verdict, and then its short job started
    records = fragmenting()
    first = collected(records)
    add_guard(records, first, Policies(compiled()), now=NOW)
    decided = _as_decided(records, first)
    started = [
        job("p-short", gpus=4, hours=0.5, submitted_min_ago=21, running_for_min=1).model_copy(
            update={"last_decision": decided[2].last_decision}
        )
        if record.name == "p-short"
        else record
        for record in decided
    ]
    # When the next cycle runs
    later = NOW.replace(minute=1)
    [pool] = add_guard(started, collected(started, later), Policies(compiled()), now=later)
    # Then the lookahead ran again
    assert pool.verdict is not None
    assert pool.verdict.reason != "the pool has not changed since this order was chosen"
    assert pool.verdict.scores
