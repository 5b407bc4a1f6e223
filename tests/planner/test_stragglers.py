"""Given per-node speeds (a straggler), when the planner evaluates and searches plans, then a plan that puts
the critical pipeline stage (the last: it also runs the output layer) on the slow node is penalised, the
planner moves that node to a stage with slack, and a 5%-slow node changes the recommended placement; the
plan step turns the runtime's slowest-node signal into per-GPU speeds."""

from __future__ import annotations

import pytest

from osprey_control.planner import Cluster, ModelSpec, Plan, PlanRequest, cluster, evaluate, search
from osprey_control.planner.measure import Observed, measure
from osprey_control.planner.model import OptimizerSharding, Recompute
from osprey_control.planner.placement import node_speeds_from_rank_times, place, speed_factors_with_slow_node
from osprey_control.planner.replan import DEFAULT_PLACEMENT_HYSTERESIS, CurrentPlan, Measurement, replan
from osprey_control.planner.request import build_request, request_from_item
from osprey_control.planner.search import Knobs, SearchOptions

# The model's options as they are: the search varies only the layout (and its placement).
AS_GIVEN = SearchOptions(knobs=None)

# A 70B-class model (80 x 8192, 64 heads, Megatron-Core's untied embeddings) on 8 p5.48xlarge nodes.
MODEL = ModelSpec(
    layers=80,
    hidden=8192,
    heads=64,
    seq=4096,
    vocab=131072,
    global_batch=64,
    recompute=Recompute.SELECTIVE,
    optimizer_sharding=OptimizerSharding.ZERO1,
    flash_attention=True,
    tied_embeddings=False,
    comm_overlap=True,
)
NOMINAL = cluster(64, instance_type="p5.48xlarge")
PIPELINE = Plan(tp=8, pp=8, dp=1, micro_batch=1)
LAST_NODE = 7


def _slow(node: int, speed: float = 0.95) -> Cluster:
    return NOMINAL.with_changes(speed_factors=speed_factors_with_slow_node(NOMINAL, node, speed))


def test_the_critical_stage_on_a_5_percent_slow_node_is_penalised() -> None:
    # Given the last node 5% slow; in Megatron's rank order it runs the last (critical) stage
    slow = _slow(LAST_NODE)
    nominal = evaluate(MODEL, NOMINAL, PIPELINE)
    on_critical = evaluate(MODEL, slow, PIPELINE, placement="rank-order")
    # When the planner places the nodes itself
    placed = evaluate(MODEL, slow, PIPELINE)
    # Then the rank order pays about the full 5%, and the planner's placement (the slow node swapped with the
    # node of stage 6, whose slack is the output layer's time) pays much less, moving only those two nodes
    assert on_critical.step_time_s == pytest.approx(nominal.step_time_s * 1.05, rel=0.01)
    assert placed.step_time_s < nominal.step_time_s * 1.02
    assert placed.stage_nodes == ((0,), (1,), (2,), (3,), (4,), (5,), (LAST_NODE,), (6,))


def test_a_uniform_cluster_and_a_slow_node_already_off_the_critical_stage_keep_the_rank_order() -> None:
    assert evaluate(MODEL, NOMINAL, PIPELINE).stage_nodes == ()
    # Node 0 runs the first stage, which has slack: moving nodes would gain nothing
    kept = place(_slow(0), 8)
    assert not kept.moved
    assert kept.stage_nodes[0] == (0,)


def test_a_5_percent_slow_node_changes_the_recommended_placement() -> None:
    options = SearchOptions(top_k=3)
    # Given the nominal cluster's recommendation
    before = search(MODEL, NOMINAL, options).best
    assert before is not None
    assert before.stage_nodes == ()
    # When the last node turns out 5% slow
    after = search(MODEL, _slow(LAST_NODE), options).best
    assert after is not None
    # Then the recommendation changes: a pipelined plan now names its node order, the slow node off the last
    # stage (or, for a plan without a pipeline, the plan itself changed)
    if after.plan.pp > 1:
        assert after.stage_nodes
        assert LAST_NODE not in after.stage_nodes[-1]
        assert [n for stage in after.stage_nodes for n in stage] != list(range(NOMINAL.nodes))
    else:
        assert after.plan != before.plan
    # And it is never slower than the same plan left in rank order
    assert (
        after.step_time_s <= evaluate(MODEL, _slow(LAST_NODE), after.plan, placement="rank-order").step_time_s
    )


def test_rank_compute_times_become_node_speeds() -> None:
    # Given 3 nodes of 2 ranks, one rank of node 1 10% slower (compute time, not step time)
    speeds = node_speeds_from_rank_times([2.0, 2.0, 2.0, 2.2, 2.0, 2.0], 2)
    # Then node 1 runs at 1/1.1 of the median rank, the others at full speed
    assert speeds == pytest.approx([1.0, 1 / 1.1, 1.0])
    with pytest.raises(ValueError, match="whole nodes"):
        node_speeds_from_rank_times([1.0, 1.0, 1.0], 2)


def _request() -> PlanRequest:
    item = build_request(
        "JOB#batch#llm",
        model={
            "layers": 80,
            "hidden": 8192,
            "heads": 64,
            "seq": 4096,
            "vocab": 131072,
            "global_batch": 64,
            "tied_embeddings": "off",
        },
        cluster="p5.48xlarge",
        current=PIPELINE,
        gpus=64,
    )
    return request_from_item(item)


def test_the_plan_step_turns_the_slowest_node_signal_into_gpu_speeds() -> None:
    request = _request()
    # Given the runtime reported node 7 at 0.95 of the median rank
    measurement, signals = measure(request, Observed(slowest_node_speed=0.95, slowest_node_index=7))
    # Then node 7's eight GPUs have speed 0.95 and the rest are nominal
    assert measurement.speed_factors is not None
    assert list(measurement.speed_factors) == [1.0] * 56 + [0.95] * 8
    assert signals["speed_factors"].source == "SlowestNodeSpeed"
    # And a difference within noise, or no datapoint, keeps every GPU nominal
    noise, _ = measure(request, Observed(slowest_node_speed=0.99, slowest_node_index=7))
    assert noise.speed_factors is None
    missing, signals = measure(request, Observed())
    assert missing.speed_factors is None
    assert "optional" in signals["speed_factors"].note


def test_the_plan_record_carries_the_options_and_the_node_order() -> None:
    from osprey_control.planner.record import plan_id, plan_record  # noqa: PLC0415

    # Given the planner's recommendation on the cluster with a slow last node
    best = search(MODEL, _slow(LAST_NODE)).best
    assert best is not None
    # When it becomes the job's plan record
    record = plan_record("batch#llm", best)
    # Then the job learns the options to run with and the node order per stage; the id is the layout's and,
    # since the nodes moved, their order's (the same degrees in rank order are another recommendation)
    assert record["options"] == best.options()
    assert record["stage_nodes"] == [list(stage) for stage in best.stage_nodes]
    assert record["plan_id"] == plan_id("batch#llm", best.plan, best.stage_nodes)
    assert record["plan_id"] != plan_id("batch#llm", best.plan)
    in_rank_order = [[node] for node in range(8)]
    assert plan_id("batch#llm", best.plan, in_rank_order) == plan_id("batch#llm", best.plan)


def test_a_straggler_under_the_running_plan_proposes_moving_it_and_then_rests() -> None:
    # Given a job running the planner's plan in rank order when its last node turns 5% slow
    slow = _slow(LAST_NODE)
    nominal_best = search(MODEL, NOMINAL, AS_GIVEN).best
    assert nominal_best is not None
    plan = nominal_best.plan
    current = CurrentPlan(MODEL, NOMINAL, plan, since_step=0)
    measured = Measurement(step=600, speed_factors=slow.speed_factors)
    # When the plan step re-plans with the default thresholds
    decision = replan(current, measured, options=AS_GIVEN)
    # Then the current plan is charged the straggler on its critical stage, and the proposal is the same
    # degrees with the slow node moved off the last stage: a placement-only switch, held to the 3% threshold
    assert decision.reason == "switch"
    assert decision.proposed is not None
    assert decision.proposed.plan == plan
    assert decision.proposed.stage_nodes[-1] != (LAST_NODE,)
    assert decision.hysteresis == DEFAULT_PLACEMENT_HYSTERESIS
    assert decision.expected_saving_fraction > DEFAULT_PLACEMENT_HYSTERESIS
    # And a team that wants node moves held to the plan threshold (10%) keeps the straggler where it is
    held = replan(current, measured, options=AS_GIVEN, placement_hysteresis=0.10)
    assert held.reason == "below-hysteresis"
    assert held.hysteresis == 0.10
    # And once the job runs that order, the same measurement proposes nothing more
    placed = CurrentPlan(MODEL, NOMINAL, plan, since_step=600, stage_nodes=decision.proposed.stage_nodes)
    again = replan(placed, Measurement(step=1200, speed_factors=slow.speed_factors), options=AS_GIVEN)
    assert again.reason == "no-better-plan"


def test_a_straggler_is_moved_even_when_new_degrees_would_not_clear_the_plan_threshold() -> None:
    # Given a job on a 4-stage pipeline of the same model, in rank order, its last node 5% slow
    plan = Plan(tp=8, pp=4, dp=2, micro_batch=1)
    slow = _slow(LAST_NODE)
    current = CurrentPlan(MODEL, NOMINAL, plan, since_step=0)
    now = evaluate(MODEL, slow, plan, placement="rank-order")
    best = search(MODEL, slow, AS_GIVEN).best
    assert best is not None
    assert best.plan != plan
    # When it is re-planned with a plan threshold above what the new degrees would gain
    gain = (now.step_time_s - best.step_time_s) / now.step_time_s
    assert 0.1 < gain < 0.9
    measured = Measurement(step=600, speed_factors=slow.speed_factors)
    decision = replan(current, measured, options=AS_GIVEN, hysteresis=gain + 0.01)
    # Then its own degrees, the straggler moved off the last stage, are proposed under the placement threshold
    assert decision.reason == "switch", decision.to_dict()
    assert decision.proposed is not None
    assert decision.proposed.plan == plan
    assert all(LAST_NODE not in stage for stage in decision.proposed.stage_nodes[-1:])
    assert decision.hysteresis == DEFAULT_PLACEMENT_HYSTERESIS


def test_new_options_on_the_same_degrees_are_held_to_the_plan_threshold() -> None:
    # Given the options left to the search (as a plan request leaves them at "any") and a job running the
    # planner's degrees with selective recompute, its last node 2% slow
    searched = SearchOptions(knobs=Knobs())
    best = search(MODEL, NOMINAL, searched).best
    assert best is not None
    current = CurrentPlan(MODEL, NOMINAL, best.plan)
    slow = _slow(LAST_NODE, 0.98)
    # When it is re-planned with the default thresholds
    decision = replan(current, Measurement(step=600, speed_factors=slow.speed_factors), options=searched)
    # Then the best (same degrees, another recompute mode, the node moved) is a new plan: it gains a few
    # percent, more than the placement threshold, but it is held to the 10% hysteresis and not proposed
    assert decision.proposed is not None
    assert decision.proposed.plan == best.plan
    assert decision.proposed.options() != decision.current.options()
    assert DEFAULT_PLACEMENT_HYSTERESIS < decision.expected_saving_fraction < 0.10
    assert (decision.reason, decision.hysteresis) == ("below-hysteresis", 0.10)


def test_a_placement_threshold_outside_0_to_1_is_refused() -> None:
    with pytest.raises(ValueError, match="placement_hysteresis"):
        replan(CurrentPlan(MODEL, NOMINAL, PIPELINE), Measurement(step=0), placement_hysteresis=1.0)


def test_two_slow_nodes_of_the_last_stage_swap_with_the_fastest_elsewhere() -> None:
    # Given nodes 6 and 7 (the last stage of a 4-stage pipeline, 2 nodes each) slow, node 4 slightly slow too
    factors = [0.9 if rank >= 48 else (0.99 if 32 <= rank < 40 else 1.0) for rank in range(64)]
    placed = place(NOMINAL.with_changes(speed_factors=factors), 4)
    # Then the last stage gets the two fastest nodes of other stages (5 and 3, nearest first), and every
    # other node stays where the rank order put it
    assert placed.stage_nodes == ((0, 1), (2, 7), (4, 6), (3, 5))
    assert placed.speeds[-1] == 1.0
