"""Given a decision and the inputs it was recorded with, when it is derived again, then any policy sees the same
aggregated values the engine saw, and custom rules get their recorded answers (``osprey policy replay``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from osprey_control.derivation import (
    compile_policy,
    derive,
    metrics_from_inputs,
    replay_job,
    summarize_inputs,
)
from tests.unit.derivation.helpers import SEED_RULES, RecordingInvoker, custom, job, policy

METRICS = ("gpu_utilization", "memory_bandwidth_utilization", "node_interconnect_latency")
node_values = st.dictionaries(
    st.sampled_from(METRICS), st.floats(min_value=0, max_value=2000, allow_nan=False), min_size=0, max_size=3
)


def _with_aggregation(aggregation: str) -> list[dict[str, Any]]:
    return [{**rule, "aggregation": aggregation} for rule in SEED_RULES]


@given(
    nodes=st.lists(node_values, min_size=0, max_size=12), aggregation=st.sampled_from(["mean", "min", "max"])
)
def test_any_policy_aggregates_the_summary_as_it_did_the_nodes(
    nodes: list[dict[str, float]], aggregation: str
) -> None:
    # Given a job's node values and the summary a decision stores (through JSON, as DynamoDB holds it)
    original = job(*nodes)
    stored = json.loads(json.dumps(summarize_inputs(original)))
    rebuilt = metrics_from_inputs("j1", stored)
    # When a policy with any aggregation derives from both
    compiled = compile_policy(policy(_with_aggregation(aggregation)))
    then, again = derive(compiled, original, 50), derive(compiled, rebuilt, 50)
    # Then every rule read the same value, and the priority is the same
    assert [rule.value for rule in again.rules] == pytest.approx([rule.value for rule in then.rules])
    assert (again.priority, again.reason) == (then.priority, then.reason)


def test_gaps_stay_gaps() -> None:
    summary = summarize_inputs(job({"gpu_utilization": float("nan")}, {"gpu_utilization": 80.0}))
    assert summary["nodes"] == {"gpu_utilization": [1, 80.0, 80.0, 80.0]}


def test_a_replay_chains_from_its_own_priorities_and_reuses_recorded_answers() -> None:
    # Given two recorded decisions of a job under a policy with a custom rule that answered 20
    old = compile_policy(policy([*SEED_RULES, custom("spot", fallback=50, weight=1.0)]))
    busy, idle = job({"gpu_utilization": 95.0}), job({"gpu_utilization": 10.0})
    invoker = RecordingInvoker({"spot": {"derived_priority": 20}})
    first = derive(old, busy, 50, invoker)
    second = derive(old, idle, first.priority, invoker)
    history = [
        {
            "recorded_at": "t1",
            "derived_priority": first.priority,
            "decision": {**first.to_dict(), "inputs": summarize_inputs(busy)},
        },
        {
            "recorded_at": "t2",
            "derived_priority": second.priority,
            "decision": {**second.to_dict(), "inputs": summarize_inputs(idle)},
        },
    ]
    # When replayed under a policy that drops the memory and latency rules
    new = compile_policy(
        policy([SEED_RULES[0], custom("spot", fallback=50, weight=1.0)], maxPriorityChange=100)
    )
    replayed = replay_job(new, "j1", history)
    # Then the rule's recorded answer is used (never invoked again) and each step starts from the replayed one
    assert [rule.outcome for rule in replayed[0].new.rules if rule.kind == "custom"] == ["answered"]
    assert replayed[1].new.previous == replayed[0].new_priority
    # The GPU rule (weight 0.6) and the recorded answer 20 (weight 1.0), weighted
    gpu_only = [(0.6 * (10 + 90 * utilization) + 20) / 1.6 for utilization in (0.95, 0.10)]
    assert [step.new.target for step in replayed] == pytest.approx(gpu_only)
    assert [step.old_priority for step in replayed] == [first.priority, second.priority]


def test_a_decision_recorded_without_inputs_is_marked_and_keeps_the_priority() -> None:
    compiled = compile_policy(policy())
    replayed = replay_job(
        compiled, "j1", [{"recorded_at": "t", "derived_priority": 60, "decision": {"previous": 55}}]
    )
    assert not replayed[0].replayable
    assert replayed[0].new_priority == 55


def test_a_malformed_summary_names_its_field() -> None:
    with pytest.raises(ValueError, match=r"inputs\.nodes\.gpu_utilization"):
        metrics_from_inputs("j1", {"nodes": {"gpu_utilization": [1, 2]}})
