"""Given a running plan and what the job measured, when the planner re-plans, then it switches only for a
predicted gain above the hysteresis threshold, never sooner than ``OSPREY_INTERVAL`` steps after the last
switch, and reproduces the seed's case: 128 A100s, a 300B model on 8 tp x 16 dp, inter-node latency 3x and
bandwidth down to a quarter -> a plan with pipeline parallelism and the expected step-time saving.

The seed's case is a throughput-only what-if (``enforce_memory=False``): a 300B model's model states are
~5.6 TB, so any plan with tp*pp < ~70 (8x16 and the seed's own 4x4x8 included) needs hundreds of GiB per
A100-80GB. docs/planner.md explains this and shows the memory-checked variant."""

from __future__ import annotations

import pytest

from osprey_control.planner import (
    CurrentPlan,
    Measurement,
    ModelSpec,
    Plan,
    SearchOptions,
    cluster,
    evaluate,
    interval_from_env,
    plan_from_record,
    record_for_decision,
    replan,
    search,
)
from osprey_control.planner.replan import measured_cluster

# SC21 Table 1's 310B shape (96 x 16384, 128 heads), the seed's "300B-parameter model".
SEED_MODEL = ModelSpec(layers=96, hidden=16384, heads=128, seq=2048, vocab=51200, global_batch=1024)
SEED_CLUSTER = cluster(128, gpu="A100-80GB", gpus_per_node=8, network_gbits=1600)
SEED_PLAN = Plan(tp=8, pp=1, dp=16, micro_batch=1)
WHAT_IF = SearchOptions(enforce_memory=False)
# Latency 3x the 15 us default; the effective per-node bandwidth falls from 1600 to 400 Gb/s.
DEGRADED = Measurement(step=600, network_gbits=400, network_latency_us=45)

# A model the planner places itself (memory checked): SC21's 18.4B shape on the same 16 nodes.
MODEL = ModelSpec(layers=40, hidden=6144, heads=48, seq=2048, vocab=51200, global_batch=1024)


def _planned() -> CurrentPlan:
    best = search(MODEL, SEED_CLUSTER).best
    assert best is not None
    return CurrentPlan(MODEL, SEED_CLUSTER, best.plan, since_step=0)


def test_seed_case_moves_toward_pipeline_parallelism_and_reports_the_saving() -> None:
    # Given the seed's job: 300B on 16 nodes of 8 A100s, running 8 tp x 16 dp since step 0
    current = CurrentPlan(SEED_MODEL, SEED_CLUSTER, SEED_PLAN)
    # When inter-node latency triples and bandwidth falls to a quarter
    decision = replan(current, DEGRADED, options=WHAT_IF)
    # Then the planner switches to a plan with pipeline parallelism and fewer data-parallel replicas
    assert decision.switch, decision.reason
    assert decision.proposed is not None
    assert decision.proposed.plan.pp > 1
    assert decision.proposed.plan.dp < SEED_PLAN.dp
    # And it says how much step time it expects to save (more than the 10% hysteresis)
    saving = decision.current.step_time_s - decision.proposed.step_time_s
    assert decision.expected_saving_s == pytest.approx(saving)
    assert decision.expected_saving_fraction > 0.10
    assert decision.to_dict()["expected_saving_s"] == pytest.approx(saving)


def test_seed_case_the_seeds_own_4x4x8_is_also_predicted_faster() -> None:
    degraded = measured_cluster(SEED_CLUSTER, DEGRADED)
    now = evaluate(SEED_MODEL, degraded, SEED_PLAN)
    seed_choice = evaluate(SEED_MODEL, degraded, Plan(tp=4, pp=4, dp=8, micro_batch=1))
    assert seed_choice.step_time_s < 0.9 * now.step_time_s


def test_seed_case_the_worse_the_network_the_deeper_the_pipeline() -> None:
    # Given the same job measured on a healthy, a halved and a quartered network
    current = CurrentPlan(SEED_MODEL, SEED_CLUSTER, SEED_PLAN)
    decisions = [
        replan(
            current, Measurement(step=600, network_gbits=gbits, network_latency_us=latency), options=WHAT_IF
        )
        for gbits, latency in ((1600, 15), (800, 45), (400, 45))
    ]
    proposed = [d.proposed for d in decisions]
    assert all(p is not None for p in proposed)
    depths = [p.plan.pp for p in proposed if p is not None]
    savings = [d.expected_saving_fraction for d in decisions]
    # Then the proposed pipeline never gets shallower and the predicted saving grows, because the term the
    # network degrades is the exposed data-parallel all-reduce of 8x16 (1/8 of the gradients per GPU)
    assert depths == sorted(depths)
    assert savings == sorted(savings)
    assert decisions[-1].current.dp_exposed_s > 3 * decisions[0].current.dp_exposed_s


def test_seed_case_with_the_memory_check_the_current_plan_does_not_fit() -> None:
    # Given the default search options (memory enforced at 90% of 80 GiB)
    decision = replan(CurrentPlan(SEED_MODEL, SEED_CLUSTER, SEED_PLAN), DEGRADED)
    # Then the report says the running plan cannot fit, and the proposal is one that does
    assert not decision.current.feasible
    assert decision.current.memory_gib_per_gpu > 500
    assert decision.proposed is not None
    assert decision.proposed.feasible
    assert decision.proposed.plan.pp > 1


def test_below_hysteresis_no_switch() -> None:
    # Given the plan the planner chose on the healthy network
    current = _planned()
    # When the network degrades enough to make another plan faster, but by less than 10%
    decision = replan(current, Measurement(step=600, network_gbits=200, network_latency_us=45))
    # Then no switch is proposed, and the decision still names the better plan and its small gain
    assert not decision.switch
    assert decision.reason == "below-hysteresis"
    assert decision.proposed is not None
    assert decision.proposed.plan != current.plan
    assert 0.0 < decision.expected_saving_fraction <= 0.10
    # And a lower threshold lets the same gain through
    assert replan(
        current, Measurement(step=600, network_gbits=200, network_latency_us=45), hysteresis=0.05
    ).switch


def test_unchanged_cluster_no_better_plan() -> None:
    current = _planned()
    decision = replan(current, Measurement(step=600))
    assert not decision.switch
    assert decision.reason == "no-better-plan"


def test_interval_default_60_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OSPREY_INTERVAL", raising=False)
    current = CurrentPlan(SEED_MODEL, SEED_CLUSTER, SEED_PLAN, since_step=100)
    # Given a gain well above the hysteresis, 59 steps after the current plan was adopted
    early = replan(current, Measurement(step=159, network_gbits=400, network_latency_us=45), options=WHAT_IF)
    # Then it is too soon; at 60 steps it switches
    assert (early.switch, early.reason, early.interval) == (False, "too-soon", 60)
    on_time = replan(
        current, Measurement(step=160, network_gbits=400, network_latency_us=45), options=WHAT_IF
    )
    assert (on_time.switch, on_time.reason) == (True, "switch")


def test_interval_from_osprey_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSPREY_INTERVAL", "100")
    current = CurrentPlan(SEED_MODEL, SEED_CLUSTER, SEED_PLAN, since_step=0)
    assert replan(current, Measurement(step=99, network_gbits=400), options=WHAT_IF).reason == "too-soon"
    assert replan(current, Measurement(step=100, network_gbits=400), options=WHAT_IF).switch


@pytest.mark.parametrize("raw", ["0", "-5", "sixty", "1.5"])
def test_invalid_osprey_interval_names_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match="OSPREY_INTERVAL must be a positive integer"):
        interval_from_env({"OSPREY_INTERVAL": raw})


def test_interval_from_env_default_and_value() -> None:
    assert interval_from_env({}) == 60
    assert interval_from_env({"OSPREY_INTERVAL": " 75 "}) == 75


def test_invalid_hysteresis_is_refused() -> None:
    with pytest.raises(ValueError, match="hysteresis"):
        replan(_planned(), Measurement(step=0), hysteresis=1.5)


def test_a_straggler_counts_in_the_measurement() -> None:
    # Given one GPU measured at half speed
    current = _planned()
    speeds = [1.0] * SEED_CLUSTER.gpus
    speeds[5] = 0.5
    decision = replan(current, Measurement(step=600, speed_factors=speeds))
    # Then the current plan's prediction is slower than on the nominal cluster
    nominal = evaluate(MODEL, SEED_CLUSTER, current.plan)
    assert decision.current.step_time_s > 1.5 * nominal.step_time_s


def test_a_switch_becomes_the_jobs_plan_record_and_nothing_else_does() -> None:
    switch = replan(CurrentPlan(SEED_MODEL, SEED_CLUSTER, SEED_PLAN), DEGRADED, options=WHAT_IF)
    record = record_for_decision("sagemaker#llm-7", switch)
    assert record is not None
    assert switch.proposed is not None
    assert plan_from_record(record) == switch.proposed.plan
    assert record["reason"] == "switch"
    assert record["expected_saving_fraction"] == pytest.approx(switch.expected_saving_fraction)
    held = replan(_planned(), Measurement(step=600, network_gbits=200, network_latency_us=45))
    assert record_for_decision("sagemaker#llm-7", held) is None
