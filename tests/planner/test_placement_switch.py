"""Given a job running a pipeline in Megatron's rank order when the node of its last (critical) stage turns
slow, when the plan step runs, then it proposes the same degrees with that node moved (a placement-only
switch), ``osprey.adjust_parallelism`` hands it to the job, the job reports the order it applied, and the
next plan step proposes nothing more (moto DynamoDB and CloudWatch)."""

from __future__ import annotations

import osprey
from osprey.planning import report_plan_progress
from osprey_control.planner import Cluster, Plan, evaluate, search
from osprey_control.planner.order import plan_key
from osprey_control.planner.placement import speed_factors_with_slow_node
from osprey_control.planner.record import record_from_item
from osprey_control.planner.request import build_request, request_from_item
from tests.planner.conftest import Aws
from tests.planner.test_step import (
    _env,
    _plan_item,
    _put,
    _request_item,
    _run,
    _running_job,
    _runtime_metrics,
)

# A 70B-class model on 8 p5.48xlarge nodes, every option fixed: the search varies the layout and placement.
MODEL = {"layers": 80, "hidden": 8192, "heads": 64, "seq": 4096, "vocab": 131072, "global_batch": 64,
         "recompute": "selective", "sequence_parallel": "on", "optimizer_sharding": "zero1",
         "flash_attention": "on", "comm_overlap": "on"}  # fmt: skip
INSTANCE = "p5.48xlarge"
SLOW_NODE, SPEED = 7, 0.95


def _slow(nominal: Cluster) -> Cluster:
    return nominal.with_changes(speed_factors=speed_factors_with_slow_node(nominal, SLOW_NODE, SPEED))


def _best_with_the_straggler() -> Plan:
    """The degrees the planner picks with the last node 5% slow (placed, the slow node moves off the last stage)."""
    request = request_from_item(
        build_request("JOB#batch#x", model=MODEL, cluster=INSTANCE, current=Plan(8, 8, 1, 1))
    )
    best = search(request.model, _slow(request.cluster), request.options).best
    assert best is not None
    assert best.plan.pp > 1
    assert best.stage_nodes
    return best.plan


def _job_with_a_slow_last_node(aws: Aws, plan: Plan) -> None:
    _running_job(aws, "llm", [f"i-{n}" for n in range(8)])
    osprey.request_planning(MODEL, INSTANCE, plan, client=aws.dynamodb, environ=_env("llm"))
    assert report_plan_progress(600, plan, client=aws.dynamodb, environ=_env("llm")) == "updated"
    request = request_from_item(build_request("JOB#batch#x", model=MODEL, cluster=INSTANCE, current=plan))
    step = evaluate(request.model, _slow(request.cluster), plan, placement="rank-order").step_time_s
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=step)
    _put(
        aws, "llm", "0", {"SlowestNodeSpeed": (SPEED, "None"), "SlowestNodeIndex": (float(SLOW_NODE), "None")}
    )


def test_a_straggler_on_the_critical_stage_is_moved_without_changing_the_plan(aws: Aws) -> None:
    # Given a job running, in Megatron's rank order, the degrees the planner picks with its last node 5% slow
    plan = _best_with_the_straggler()
    _job_with_a_slow_last_node(aws, plan)
    # When the plan step runs with its default thresholds
    report = _run(aws)
    # Then it writes a record with the same degrees and the slow node off the last stage
    assert report["decisions"] == {"switch": 1}, report
    record = record_from_item(_plan_item(aws, "llm") or {})
    assert {name: record[name] for name in ("tp", "pp", "dp", "micro_batch", "virtual")} == plan.to_dict()
    stage_nodes = record["stage_nodes"]
    assert stage_nodes is not None
    assert SLOW_NODE not in stage_nodes[-1]
    # And the job, running rank order, gets it as a new placement of its plan; told its order, nothing new
    assert osprey.adjust_parallelism(660, plan, client=aws.dynamodb, environ=_env("llm")) == plan
    assert (
        osprey.adjust_parallelism(
            720, plan, client=aws.dynamodb, environ=_env("llm"), stage_nodes=stage_nodes
        )
        is None
    )
    # And its progress report with that order adopted it: the request knows the order and since when
    request = request_from_item(_request_item(aws, "llm"))
    assert request.current_stage_nodes == tuple(tuple(stage) for stage in stage_nodes)
    assert request.since_step == 720
    assert _request_item(aws, "llm")["current_key"] == {"S": plan_key(plan, stage_nodes)}
    # When the plan step runs again, 100 steps on, with the same straggler and the step the placed order runs
    placed = evaluate(request.model, _slow(request.cluster), plan).step_time_s
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=placed, minutes_ago=1)
    assert (
        report_plan_progress(820, plan, client=aws.dynamodb, environ=_env("llm"), stage_nodes=stage_nodes)
        == "updated"
    )
    again = _run(aws)
    # Then the placed plan is the best there is: no new record
    assert again["decisions"] == {"no-better-plan": 1}, again
    assert again["written"] == 0


def test_a_job_back_in_rank_order_reports_no_order() -> None:
    # Given the key of a plan in rank order and of the same plan with two nodes swapped
    plan = Plan(8, 4, 1, 1)
    assert plan_key(plan, [[0], [1], [2], [3]]) == plan_key(plan) == "8,4,1,1,1"
    assert plan_key(plan, [[0], [1], [3], [2]]) == "8,4,1,1,1|0;1;3;2"
