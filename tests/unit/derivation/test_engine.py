"""Given a policy, a job's metrics and its applied priority, when the engine derives, then the result follows
DESIGN §4 step by step, and the explanation says why."""

from __future__ import annotations

import math
from typing import Any

import pytest

from osprey_control.derivation import CustomRuleError, FailureReason, compile_policy, derive
from tests.unit.derivation.helpers import SEED_RULES, RecordingInvoker, custom, job, policy

SEED_NODE = {
    "gpu_utilization": 95.0,
    "memory_bandwidth_utilization": 70.0,
    "node_interconnect_latency": 120.0,
}
GPU_P = 10 + 90 * 0.95
MEM_P = 5 + 95 * math.log10(1 + 9 * 0.7)
LAT_P = 1 + 49 * (1 - 120 / 2000)
SEED_BASE = 0.6 * GPU_P + 0.3 * MEM_P + 0.1 * LAT_P


def test_worked_example_is_damped_to_max_priority_change() -> None:
    # Given the seed policy and one well-used node, when derived from 50
    decision = derive(policy(), job(SEED_NODE), 50)
    # Then every rule's arithmetic is visible and the +38 jump is damped to +10
    gpu, mem, lat = decision.rules
    assert (gpu.value, gpu.normalized, gpu.score, gpu.priority) == pytest.approx((95, 0.95, 0.95, GPU_P))
    assert mem.score == pytest.approx(math.log10(7.3))
    assert mem.priority == pytest.approx(MEM_P)
    assert (lat.normalized, lat.score, lat.priority) == pytest.approx((0.06, 0.94, LAT_P))
    assert decision.base == pytest.approx(SEED_BASE)
    assert decision.target == pytest.approx(SEED_BASE)
    assert (decision.priority, decision.previous, decision.reason) == (60, 50, "damped")


def test_close_target_is_reached_and_rounded_half_up() -> None:
    decision = derive(policy(), job(SEED_NODE), 85)
    assert decision.priority == math.floor(SEED_BASE + 0.5) == 88
    assert decision.reason == "derived"


def test_rule_without_data_is_skipped_and_weights_renormalised() -> None:
    node = {"gpu_utilization": 95.0, "memory_bandwidth_utilization": 70.0}
    decision = derive(policy(), job(node), 85)
    assert decision.rules[2].used is False
    assert decision.rules[2].outcome == "no-data"
    assert decision.rules[2].priority is None
    assert decision.base == pytest.approx((0.6 * GPU_P + 0.3 * MEM_P) / 0.9)


def test_no_data_at_all_holds_the_priority() -> None:
    decision = derive(policy(), job({}, {}), 37)
    assert (decision.priority, decision.target, decision.base, decision.reason) == (37, None, None, "no-data")
    assert all(rule.outcome == "no-data" for rule in decision.rules)


def test_never_derived_job_starts_from_initial_priority() -> None:
    decision = derive(policy(initialPriority=20), job({}), None)
    assert decision.previous == decision.priority == 20


@pytest.mark.parametrize("previous", [-1, 101, 50.0, True])
def test_invalid_previous_priority_is_refused(previous: Any) -> None:
    with pytest.raises(ValueError, match=r"previous priority must be an integer 0\.\.100"):
        derive(policy(), job(SEED_NODE), previous)


@pytest.mark.parametrize(("aggregation", "expected"), [("mean", 60.0), ("min", 20.0), ("max", 100.0)])
def test_aggregation_over_nodes(aggregation: str, expected: float) -> None:
    rules = [{**SEED_RULES[0], "aggregation": aggregation}]
    nodes = [{"gpu_utilization": 20.0}, {"gpu_utilization": 100.0}, {"gpu_utilization": 60.0}, {}]
    decision = derive(policy(rules), job(*nodes), 50)
    assert decision.rules[0].value == pytest.approx(expected)


@pytest.mark.parametrize(("value", "normalized"), [(-10.0, 0.0), (150.0, 1.0), (25.0, 0.25)])
def test_normalised_value_is_clamped_into_the_range(value: float, normalized: float) -> None:
    decision = derive(policy([SEED_RULES[0]]), job({"gpu_utilization": value}), 50)
    assert decision.rules[0].normalized == normalized


def test_custom_range_and_job_level_queue_wait() -> None:
    rules = [
        {
            "metric": "queue_wait",
            "weight": 1,
            "scaling": "linear",
            "minPriority": 0,
            "maxPriority": 100,
            "range": [0, 3600],
        }
    ]
    decision = derive(policy(rules, maxPriorityChange=100), job(queue_wait=900), 0)
    assert decision.rules[0].normalized == 0.25
    assert decision.priority == 25


def test_queue_wait_on_a_node_is_not_read_as_job_metric() -> None:
    rules = [{"metric": "queue_wait", "weight": 1, "scaling": "linear", "minPriority": 0, "maxPriority": 100}]
    decision = derive(policy(rules), job({"queue_wait": 5000.0}), 10)
    assert decision.reason == "no-data"


@pytest.mark.parametrize(
    ("deadband", "target_gpu", "previous", "priority", "reason"),
    [
        (5, 54.0, 50, 50, "deadband"),  # delta 4 < 5
        (5, 55.0, 50, 55, "derived"),  # delta 5 is not < 5
        (0, 50.0, 50, 50, "derived"),
    ],
)
def test_deadband(deadband: float, target_gpu: float, previous: int, priority: int, reason: str) -> None:
    rules = [{**SEED_RULES[0], "minPriority": 0}]
    decision = derive(policy(rules, deadband=deadband), job({"gpu_utilization": target_gpu}), previous)
    assert (decision.priority, decision.reason) == (priority, reason)


@pytest.mark.parametrize(("target", "previous", "expected"), [(50.5, 50, 51), (49.5, 50, 50), (48.5, 48, 49)])
def test_rounding_is_half_up(target: float, previous: int, expected: int) -> None:
    rules = [{**SEED_RULES[0], "minPriority": 0}]
    decision = derive(policy(rules), job({"gpu_utilization": target}), previous)
    assert decision.priority == expected


def test_fractional_max_priority_change_never_overshoots_after_rounding() -> None:
    rules = [{**SEED_RULES[0], "minPriority": 0}]
    decision = derive(policy(rules, maxPriorityChange=1.5), job({"gpu_utilization": 90.0}), 50)
    # 50 + 1.5 would round to 52, a change of 2 > 1.5: the step is held to floor(1.5) = 1.
    assert decision.priority == 51
    assert decision.reason == "damped"


def test_weighted_custom_rule_is_one_more_component() -> None:
    rules = [*SEED_RULES, custom("w", weight=1.0)]
    invoker = RecordingInvoker({"w": {"derived_priority": 20}})
    decision = derive(policy(rules, maxPriorityChange=100), job(SEED_NODE), 50, invoker)
    assert decision.base == pytest.approx((SEED_BASE * 1.0 + 20 * 1.0) / 2.0)
    assert decision.rules[3].outcome == "answered"
    assert decision.rules[3].weight == 1.0
    # The weighted rule sees the built-in components' mean as its base priority.
    assert invoker.calls[0].event["base_priority"] == pytest.approx(SEED_BASE)


def test_stages_run_in_order_each_replacing_the_running_value() -> None:
    rules = [custom("second", fallback=1), *SEED_RULES, custom("third", fallback=2)]
    invoker = RecordingInvoker({"second": {"derived_priority": 70}, "third": {"derived_priority": 64}})
    decision = derive(policy(rules, maxPriorityChange=100), job(SEED_NODE), 50, invoker)
    assert [call.rule_index for call in invoker.calls] == [0, 4]
    assert invoker.calls[0].event["base_priority"] == pytest.approx(SEED_BASE)
    assert invoker.calls[1].event["base_priority"] == 70
    assert decision.base == pytest.approx(SEED_BASE)
    assert (decision.target, decision.priority) == (64, 64)
    assert [rule.index for rule in decision.rules] == [0, 1, 2, 3, 4]


def test_stage_without_weighted_components_starts_from_previous_priority() -> None:
    invoker = RecordingInvoker({"only": {"derived_priority": 44}})
    decision = derive(policy([custom("only")]), job({}), 40, invoker)
    assert invoker.calls[0].event["base_priority"] == 40
    assert (decision.base, decision.target, decision.priority) == (None, 44, 44)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (CustomRuleError(FailureReason.TIMEOUT), "timeout"),
        (CustomRuleError(FailureReason.THROTTLED), "throttled"),
        (RuntimeError("boom"), "error"),
        ("not json", "unparsable"),
        ([1, 2], "unparsable"),
        ({"derived_priority": "55"}, "unparsable"),
        ({"derived_priority": True}, "unparsable"),
        ({"statusCode": 500, "body": '{"derived_priority": 55}'}, "unparsable"),
        ({"statusCode": 200, "body": "<html>"}, "unparsable"),
        ({"derived_priority": math.nan}, "non-finite"),
        ('{"derived_priority": Infinity}', "non-finite"),
        ({"derived_priority": 10**400}, "non-finite"),
        ({}, "missing"),
        ({"derived_priority": None}, "missing"),
    ],
)
def test_failing_custom_rule_yields_its_fallback_with_the_reason(answer: Any, reason: str) -> None:
    invoker = RecordingInvoker({"flaky": answer})
    decision = derive(policy([custom("flaky", fallback=33)], maxPriorityChange=100), job({}), 50, invoker)
    rule = decision.rules[0]
    assert (rule.priority, rule.value, rule.outcome) == (33, None, f"fallback:{reason}")
    assert decision.priority == 33


@pytest.mark.parametrize(
    ("answer", "priority"),
    [
        ({"derived_priority": 72.4}, 72.4),
        ({"statusCode": 200, "body": '{"derived_priority": 61}'}, 61),
        (b'{"derived_priority": 12}', 12),
        ({"derived_priority": 150}, 100),
        ({"derived_priority": -5}, 0),
    ],
)
def test_custom_answers_are_read_in_both_forms_and_clamped(answer: Any, priority: float) -> None:
    decision = derive(
        policy([custom("r")], maxPriorityChange=100), job({}), 50, RecordingInvoker({"r": answer})
    )
    assert decision.rules[0].priority == priority
    assert decision.rules[0].outcome == "answered"


def test_without_an_invoker_custom_rules_fall_back() -> None:
    decision = derive(policy([custom("r", fallback=45)]), job({}), 50)
    assert (decision.rules[0].outcome, decision.priority) == ("fallback:not-invoked", 45)


def test_custom_rule_event_follows_the_contract() -> None:
    invoker = RecordingInvoker({"r": {"derived_priority": 1}})
    nodes = [
        {**SEED_NODE, "gpu_memory_utilization": 80.0, "spot_interruption_risk": 0.5},
        {"gpu_utilization": 10.0},
    ]
    derive(policy([*SEED_RULES, custom("r", timeoutMs=250)]), job(*nodes), 42, invoker)
    call = invoker.calls[0]
    assert (call.policy, call.rule_index, call.timeout_ms) == ("test-policy", 3, 250)
    assert call.event == {
        "version": "1",
        "policy": "test-policy",
        "job": {"id": "j1", "backend": "sagemaker", "name": "j1-name"},
        "current_priority": 42,
        # a stage sees the weighted mean: gpu is averaged over both nodes, the others come from node 0
        "base_priority": pytest.approx(0.6 * (10 + 90 * 0.525) + 0.3 * MEM_P + 0.1 * LAT_P),
        "node_metrics": [
            {
                "node_id": "i-0",
                "gpu_util": 0.95,
                "memory_bw": 0.7,
                "gpu_mem": 0.8,
                "interconnect_latency_us": 120.0,
                "spot_interruption_risk": 0.5,
            },
            {
                "node_id": "i-1",
                "gpu_util": 0.1,
                "memory_bw": None,
                "gpu_mem": None,
                "interconnect_latency_us": None,
                "spot_interruption_risk": None,
            },
        ],
    }


def test_compiled_policy_gives_the_same_decision_as_the_model() -> None:
    model = policy([*SEED_RULES, custom("r", weight=0.5)], deadband=1)
    assert derive(compile_policy(model), job(SEED_NODE), 50) == derive(model, job(SEED_NODE), 50)


def test_decision_json_has_the_documented_keys() -> None:
    decision = derive(policy([*SEED_RULES, custom("r")]), job(SEED_NODE), 50)
    document = decision.to_dict()
    assert list(document) == ["priority", "previous", "target", "base", "reason", "rules"]
    assert list(document["rules"][0]) == [
        "index",
        "kind",
        "metric",
        "value",
        "normalized",
        "score",
        "priority",
        "weight",
        "used",
        "outcome",
    ]
    assert list(document["rules"][3]) == [
        "index",
        "kind",
        "arn",
        "value",
        "normalized",
        "score",
        "priority",
        "weight",
        "used",
        "outcome",
    ]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_samples_are_gaps_not_values(bad: float) -> None:
    decision = derive(policy([SEED_RULES[0]]), job({"gpu_utilization": bad}, {"gpu_utilization": 40.0}), 50)
    assert decision.rules[0].value == 40.0
    only_bad = derive(policy([SEED_RULES[0]]), job({"gpu_utilization": bad}), 50)
    assert (only_bad.reason, only_bad.priority) == ("no-data", 50)


def test_huge_finite_samples_average_without_overflow() -> None:
    decision = derive(
        policy([SEED_RULES[0]]), job({"gpu_utilization": 1e308}, {"gpu_utilization": 1e308}), 50
    )
    assert decision.rules[0].normalized == 1.0


def test_a_non_number_from_a_collector_skips_the_rule_and_fails_only_the_custom_event() -> None:
    # Given a job whose data holds a string where a number belongs
    broken = job({"gpu_utilization": 80.0, "spot_interruption_risk": "high"})  # type: ignore[dict-item]
    rules = [SEED_RULES[0], {**SEED_RULES[0], "metric": "spot_interruption_risk"}, custom("r", fallback=30)]
    # When it is derived, Then nothing raises: the bad rule is skipped and the custom rule falls back
    decision = derive(policy(rules), broken, 50, RecordingInvoker({"r": {"derived_priority": 90}}))
    assert decision.rules[0].outcome == "used"
    assert decision.rules[1].outcome == "invalid-data"
    assert decision.rules[2].outcome == "fallback:error"
