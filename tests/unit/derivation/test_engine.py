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


def _signal_rule(metric: str, scaling: str = "inverse", **extra: Any) -> dict[str, Any]:
    return {"metric": metric, "weight": 1, "scaling": scaling, "minPriority": 0, "maxPriority": 100, **extra}


@pytest.mark.parametrize(
    ("metric", "scaling", "value", "normalized", "priority"),
    [
        # shortest remaining time first: 18 h of the default 72 h range left → x 0.25, inverse → 75
        ("remaining_time", "inverse", 64800.0, 0.25, 75),
        # least attained service first: 250 of the default 1000 GPU-hours held → x 0.25, inverse → 75
        ("attained_service", "inverse", 250.0, 0.25, 75),
        # big gangs first: 1025 GPUs over the default range [1, 4096] → x 1024/4095
        ("requested_gpus", "linear", 1025.0, 1024 / 4095, 25),
        ("queue_wait", "linear", 21600.0, 0.25, 25),
    ],
)
def test_job_level_signal_derives_a_queued_job_with_no_nodes(
    metric: str, scaling: str, value: float, normalized: float, priority: int
) -> None:
    # Given a policy with one rule on a job-level signal and a queued job: no nodes, only job-level values
    queued = job(signals={metric: value})
    # When it is derived from 0 with no damping in the way
    decision = derive(policy([_signal_rule(metric, scaling)], maxPriorityChange=100), queued, 0)
    # Then the rule reads the job's value (DESIGN §4.1 with one value), and the job gets a priority
    rule = decision.rules[0]
    assert (rule.metric, rule.outcome, rule.used) == (metric, "used", True)
    assert rule.value == value
    assert rule.normalized == pytest.approx(normalized)
    assert (decision.priority, decision.reason) == (priority, "derived")


def test_shorter_remaining_time_ranks_a_queued_job_higher() -> None:
    compiled = compile_policy(policy([_signal_rule("remaining_time")], maxPriorityChange=100))
    short, long = (
        derive(compiled, job(signals={"remaining_time": seconds}, job_id=name), 50)
        for name, seconds in (("short", 3600.0), ("long", 172800.0))
    )
    assert short.priority > long.priority


@pytest.mark.parametrize("metric", ["attained_service", "remaining_time", "requested_gpus"])
def test_job_level_signal_on_a_node_is_not_read(metric: str) -> None:
    # Given the signal only where node metrics sit, when derived, then the rule has no data
    decision = derive(policy([_signal_rule(metric)]), job({metric: 10.0}), 30)
    assert (decision.rules[0].outcome, decision.reason, decision.priority) == ("no-data", "no-data", 30)


@pytest.mark.parametrize("metric", ["attained_service", "remaining_time", "requested_gpus"])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_job_level_signal_is_a_gap(metric: str, bad: float) -> None:
    decision = derive(policy([_signal_rule(metric)]), job(signals={metric: bad}), 30)
    assert (decision.rules[0].outcome, decision.reason, decision.priority) == ("no-data", "no-data", 30)


def test_node_rules_without_data_leave_the_weight_to_the_job_level_rules() -> None:
    # Given the seed rules plus remaining_time and requested_gpus, and a queued job (no nodes yet)
    rules = [
        *SEED_RULES,
        _signal_rule("remaining_time", weight=3, range=[0, 36000]),
        _signal_rule("requested_gpus", scaling="linear", range=[0, 64]),
    ]
    queued = job(signals={"remaining_time": 9000.0, "requested_gpus": 16.0})
    # When it is derived
    decision = derive(policy(rules, maxPriorityChange=100), queued, 50)
    # Then the node rules are skipped and the base is the renormalised mean of the two job-level rules
    assert [rule.outcome for rule in decision.rules] == ["no-data", "no-data", "no-data", "used", "used"]
    assert decision.base == pytest.approx((3 * 75 + 1 * 25) / 4)
    assert decision.priority == 63  # 62.5 rounded half up


def test_job_level_signals_reach_a_rule_with_a_custom_range_and_aggregation() -> None:
    # A job-level metric has one value, so every aggregation gives that value
    for aggregation in ("mean", "min", "max"):
        rule = _signal_rule("attained_service", range=[0, 100], aggregation=aggregation)
        decision = derive(policy([rule], maxPriorityChange=100), job(signals={"attained_service": 40.0}), 0)
        assert (decision.rules[0].value, decision.priority) == (40.0, 60)


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


@pytest.mark.parametrize(
    ("limit", "target_gpu", "previous", "priority", "reason"),
    [
        (1, 90.0, 50, 51, "damped"),  # +40 held to +1
        (1, 10.0, 50, 49, "damped"),  # -40 held to -1
        (2, 51.75, 50, 52, "derived"),  # +1.75 is inside the limit; rounds half up to 52, still <= 2
        (2, 48.25, 50, 48, "derived"),
        (37, 100.0, 0, 37, "damped"),
        (100, 100.0, 0, 100, "derived"),
    ],
)
def test_integer_max_priority_change_bounds_the_applied_change_exactly(
    limit: int, target_gpu: float, previous: int, priority: int, reason: str
) -> None:
    # Given an integer limit (DESIGN §3) and a target far from, or just inside, the limit
    rules = [{**SEED_RULES[0], "minPriority": 0}]
    # When derived
    decision = derive(policy(rules, maxPriorityChange=limit), job({"gpu_utilization": target_gpu}), previous)
    # Then the change is the clamped step rounded half up, never more than the limit, and "damped" only when
    # the clamp bit
    assert (decision.priority, decision.reason) == (priority, reason)
    assert abs(decision.priority - previous) <= limit


def test_compiled_max_priority_change_is_an_integer() -> None:
    compiled = compile_policy(policy(maxPriorityChange=7))
    assert compiled.max_priority_change == 7
    assert isinstance(compiled.max_priority_change, int)


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
