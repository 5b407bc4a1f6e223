"""Properties of the engine over generated policies and fleets (hypothesis).

Exact equality of rounded priorities is only asserted away from x.5 ties and deadband edges, where a
last-bit floating-point difference (different summation order) may legitimately tip the rounding. The engine
sums components in policy order, as the reference does, so the two agree to the last bit; rescaled weights do
not, so there a change exactly at maxPriorityChange (an integer, so reachable by an integer-valued target) may
read ``damped`` on one side and ``derived`` on the other: only the priority is compared at that edge.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from osprey.cli.derive import ScriptedInvoker
from osprey_control.derivation import compile_policy, derive, parse_metrics_document
from osprey_control.policy import PriorityDerivationPolicy
from tests.unit.derivation.reference import DEFAULT_RANGES, JOB_LEVEL, reference_derive

METRICS = sorted(DEFAULT_RANGES)
NODE_METRICS = [metric for metric in METRICS if metric not in JOB_LEVEL]
JOB_METRICS = sorted(JOB_LEVEL)
ARN = "arn:aws:lambda:us-east-1:123456789012:function:osprey-rule-{}"

priorities = st.floats(0, 100, allow_nan=False)
weights = st.floats(1e-3, 1000, allow_nan=False)
raw_values = st.floats(-500, 5000, allow_nan=False)


@st.composite
def builtin_rules(draw: st.DrawFn, metric: str | None = None, scaling: str | None = None) -> dict[str, Any]:
    low, high = sorted((draw(priorities), draw(priorities)))
    rule: dict[str, Any] = {
        "metric": metric or draw(st.sampled_from(METRICS)),
        "weight": draw(weights),
        "scaling": scaling or draw(st.sampled_from(["linear", "logarithmic", "inverse"])),
        "minPriority": low,
        "maxPriority": high,
    }
    if draw(st.booleans()):
        lo = draw(st.floats(-1000, 1000, allow_nan=False))
        rule["range"] = [lo, lo + draw(st.floats(0.01, 5000, allow_nan=False))]
    if draw(st.booleans()):
        rule["aggregation"] = draw(st.sampled_from(["mean", "min", "max"]))
    return rule


@st.composite
def custom_rules(draw: st.DrawFn) -> dict[str, Any]:
    rule: dict[str, Any] = {"arn": ARN.format(draw(st.integers(0, 9))), "fallbackPriority": draw(priorities)}
    if draw(st.booleans()):
        rule["weight"] = draw(weights)
    return {"custom": rule}


def policy_document(rules: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "osprey.aws/v1",
        "kind": "PriorityDerivationPolicy",
        "metadata": {"name": "generated"},
        "spec": {"derivationRules": rules, **spec},
    }


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    rules = draw(
        st.lists(st.one_of(builtin_rules(), builtin_rules(), custom_rules()), min_size=1, max_size=6)
    )
    # An integer, as the model requires (DESIGN §3); small limits are where damping and rounding meet.
    spec: dict[str, Any] = {"maxPriorityChange": draw(st.one_of(st.integers(1, 5), st.integers(1, 100)))}
    if draw(st.booleans()):
        spec["deadband"] = draw(st.floats(0, 30, allow_nan=False))
    if draw(st.booleans()):
        spec["initialPriority"] = draw(st.integers(0, 100))
    return policy_document(rules, **spec)


node_value = st.one_of(raw_values, st.lists(raw_values, max_size=4))


@st.composite
def fleets(draw: st.DrawFn) -> dict[str, Any]:
    nodes = draw(st.lists(st.dictionaries(st.sampled_from(NODE_METRICS), node_value), max_size=4))
    job: dict[str, Any] = {"id": "j"}
    for metric in draw(st.sets(st.sampled_from(JOB_METRICS))):
        job[metric] = draw(st.floats(-1000, 400000, allow_nan=False))
    return {"job": job, "nodes": nodes}


def _answers(
    draw: Callable[[st.SearchStrategy[Any]], Any], document: dict[str, Any]
) -> dict[int, float | None]:
    answers: dict[int, float | None] = {}
    for index, rule in enumerate(document["spec"]["derivationRules"]):
        if "custom" in rule:
            answers[index] = draw(st.one_of(st.none(), st.floats(-50, 150, allow_nan=False)))
    return answers


def _near_tie(previous: int, target: float, spec: dict[str, Any]) -> bool:
    limit = spec.get("maxPriorityChange", 10)
    step = max(-limit, min(limit, target - previous))
    fraction = (previous + step) % 1
    deadband = float(spec.get("deadband", 0))
    return abs(fraction - 0.5) < 1e-7 or abs(abs(target - previous) - deadband) < 1e-7


def _at_limit(previous: int, target: float, spec: dict[str, Any]) -> bool:
    """The change is maxPriorityChange to within float noise: whether the clamp bit is a last-bit matter."""
    limit: int = spec.get("maxPriorityChange", 10)
    return abs(abs(target - previous) - limit) < 1e-7


@given(
    document=policies(), metrics=fleets(), previous=st.one_of(st.none(), st.integers(0, 100)), data=st.data()
)
def test_engine_matches_the_reference_transcription_of_design_4(
    document: dict[str, Any], metrics: dict[str, Any], previous: int | None, data: st.DataObject
) -> None:
    answers = _answers(data.draw, document)
    policy = PriorityDerivationPolicy.model_validate(document)
    decision = derive(
        compile_policy(policy), parse_metrics_document(metrics), previous, ScriptedInvoker(answers)
    )
    expected_priority, expected_target, expected_reason = reference_derive(
        document, metrics, previous, answers
    )
    if expected_target is None:
        assert decision.target is None
    else:
        assert decision.target is not None
        assert math.isclose(decision.target, expected_target, rel_tol=1e-9, abs_tol=1e-9)
        assume(not _near_tie(decision.previous, expected_target, document["spec"]))
    assert (decision.priority, decision.reason) == (expected_priority, expected_reason)


@given(document=policies(), metrics=fleets(), previous=st.integers(0, 100), data=st.data())
def test_applied_change_never_exceeds_max_priority_change(
    document: dict[str, Any], metrics: dict[str, Any], previous: int, data: st.DataObject
) -> None:
    answers = _answers(data.draw, document)
    decision = derive(
        PriorityDerivationPolicy.model_validate(document),
        parse_metrics_document(metrics),
        previous,
        ScriptedInvoker(answers),
    )
    assert abs(decision.priority - previous) <= document["spec"]["maxPriorityChange"]
    assert 0 <= decision.priority <= 100


@given(
    scaling=st.sampled_from(["linear", "logarithmic", "inverse"]),
    metric=st.sampled_from(NODE_METRICS),
    data=st.data(),
    values=st.lists(raw_values, min_size=2, max_size=2),
)
def test_rule_priority_is_monotone_in_its_metric(
    scaling: str, metric: str, data: st.DataObject, values: list[float]
) -> None:
    rule = data.draw(builtin_rules(metric=metric, scaling=scaling))
    policy = compile_policy(
        PriorityDerivationPolicy.model_validate(policy_document([rule], maxPriorityChange=100))
    )
    low, high = sorted(values)
    p_low, p_high = (
        derive(policy, parse_metrics_document({"nodes": [{metric: value}]}), 50).rules[0].priority
        for value in (low, high)
    )
    assert p_low is not None
    assert p_high is not None
    if scaling == "inverse":
        assert p_low >= p_high
    else:
        assert p_low <= p_high


@given(
    document=policies(),
    metrics=fleets(),
    previous=st.integers(0, 100),
    factor=st.floats(1e-3, 1e3),
    data=st.data(),
)
def test_scaling_all_weights_changes_nothing(
    document: dict[str, Any], metrics: dict[str, Any], previous: int, factor: float, data: st.DataObject
) -> None:
    scaled = copy.deepcopy(document)
    for rule in scaled["spec"]["derivationRules"]:
        target = rule.get("custom", rule)
        if "weight" in target:
            target["weight"] *= factor
            assume(0 < target["weight"] <= 1000)
    answers = _answers(data.draw, document)
    job = parse_metrics_document(metrics)
    original = derive(
        PriorityDerivationPolicy.model_validate(document), job, previous, ScriptedInvoker(answers)
    )
    rescaled = derive(
        PriorityDerivationPolicy.model_validate(scaled), job, previous, ScriptedInvoker(answers)
    )
    if original.target is None:
        assert rescaled.target is None
    else:
        assert rescaled.target is not None
        assert math.isclose(original.target, rescaled.target, rel_tol=1e-9, abs_tol=1e-9)
        assume(not _near_tie(previous, original.target, document["spec"]))
        reasons = {original.reason, rescaled.reason}
        if _at_limit(previous, original.target, document["spec"]) and reasons == {"damped", "derived"}:
            # Both move by exactly the limit; whether the clamp bit is decided by the last bit of the target.
            assert original.priority == rescaled.priority
            return
    assert (original.priority, original.reason) == (rescaled.priority, rescaled.reason)


@given(
    rules=st.lists(builtin_rules(), min_size=1, max_size=5),
    previous=st.integers(0, 100),
    node_count=st.integers(0, 5),
)
def test_no_data_holds_the_priority(rules: list[dict[str, Any]], previous: int, node_count: int) -> None:
    policy = PriorityDerivationPolicy.model_validate(policy_document(rules))
    empty = parse_metrics_document(
        {"job": {"id": "j"}, "nodes": [{"node_id": f"n{i}"} for i in range(node_count)]}
    )
    decision = derive(policy, empty, previous)
    assert (decision.priority, decision.reason, decision.target) == (previous, "no-data", None)


def test_components_are_summed_in_policy_order_like_the_reference() -> None:
    # Given equal components, a weighted custom rule between two built-in rules, and a target exactly
    # maxPriorityChange away (summed in another order, 0.1 + 0.6 + 0.1 is 0.7999999999999999, not 0.8)
    rules: list[dict[str, Any]] = [
        {
            "metric": "gpu_utilization",
            "weight": 0.1,
            "scaling": "linear",
            "minPriority": 60,
            "maxPriority": 60,
        },
        {"custom": {"arn": ARN.format(1), "fallbackPriority": 60, "weight": 0.1}},
        {
            "metric": "gpu_utilization",
            "weight": 0.6,
            "scaling": "linear",
            "minPriority": 60,
            "maxPriority": 60,
        },
    ]
    document = policy_document(rules, maxPriorityChange=10)
    metrics: dict[str, Any] = {"job": {"id": "j"}, "nodes": [{"gpu_utilization": 50}]}
    # When the engine and the reference derive it from 50
    decision = derive(
        PriorityDerivationPolicy.model_validate(document),
        parse_metrics_document(metrics),
        50,
        ScriptedInvoker({}),
    )
    # Then both reach 60 exactly: the step is the limit, not past it, so the reason is "derived"
    assert (decision.priority, decision.target, decision.reason) == (60, 60.0, "derived")
    assert reference_derive(document, metrics, 50, {}) == (60, 60.0, "derived")
