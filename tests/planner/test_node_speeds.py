"""Given a job with more than one slow node, when it reports every node's speed with its progress
(``adjust_parallelism(..., node_speeds=...)``), then the plan step places each of them, where the slowest-node
metric alone would move the slowest onto the next slow one; the speeds never outlive the report that carried
them (moto DynamoDB and CloudWatch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import osprey
from osprey.planning import node_speeds, report_plan_progress
from osprey_control.planner import evaluate
from osprey_control.planner.measure import Observed, measure
from osprey_control.planner.placement import running
from osprey_control.planner.plan import Plan
from osprey_control.planner.record import record_from_item
from osprey_control.planner.request import PlanRequest, PlanRequestError, build_request, request_from_item
from osprey_control.planner.speeds import node_speeds_json, node_speeds_of, slow_node_factors
from tests.planner.conftest import Aws
from tests.planner.test_placement_switch import (
    INSTANCE,
    MODEL,
    _best_with_the_straggler,
    _job_with_a_slow_last_node,
)
from tests.planner.test_step import _env, _plan_item, _request_item, _run, _runtime_metrics

# Nodes 6 and 7 both slow: in rank order both run the last stage of the planner's 4-stage pipeline.
SPEEDS = [1.0, 1.0, 0.999, 1.0, 1.0, 1.0, 0.95, 0.93]
PIPELINE = Plan(8, 8, 1, 1)
PLACED = _best_with_the_straggler()


def test_speeds_round_trip_and_bad_ones_are_named() -> None:
    text = node_speeds_json([1.0, 0.95123456, 2])
    assert node_speeds_of(text) == (1.0, 0.9512, 2.0)
    for bad, field in (([], "node_speeds"), ([1.0, 0.0], r"node_speeds\[1\]"), ([float("nan")], r"\[0\]")):
        with pytest.raises(ValueError, match=field):
            node_speeds_json(bad)
    assert node_speeds_of("not json") == ()
    assert node_speeds_of('[1, "x"]') == ()
    assert node_speeds_of(None) == ()
    # Nodes within 2% of the median are nominal; a node faster than the median is nominal too
    assert slow_node_factors([0.99, 0.9, 1.2], 2) == (1.0, 1.0, 0.9, 0.9, 1.0, 1.0)


def test_node_speeds_come_from_rank_compute_times() -> None:
    # Given 2 nodes of 2 ranks, one rank of node 1 taking 10% longer than the median
    assert node_speeds([1.0, 1.0, 1.0, 1.1], 2) == pytest.approx([1.0, 1.0 / 1.1])
    with pytest.raises(ValueError, match="whole nodes"):
        node_speeds([1.0, 1.0, 1.0], 2)


def _request(speeds: list[float] | None) -> PlanRequest:
    item = build_request(
        "JOB#batch#x", model=MODEL, cluster=INSTANCE, current=PIPELINE, step=700, since_step=0
    )
    if speeds is not None:
        item["node_speeds"] = {"S": node_speeds_json(speeds)}
    return request_from_item(item)


def test_the_plan_step_reads_every_slow_node_from_the_request() -> None:
    # Given a request carrying every node's speed, and a slowest-node metric naming only node 7
    request = _request(SPEEDS)
    observed = Observed(slowest_node_speed=0.93, slowest_node_index=7.0)
    # When it is measured
    measurement, signals = measure(request, observed)
    # Then both slow nodes get their speeds (the metric is not needed), and the signal names them
    factors = measurement.speed_factors
    assert factors is not None
    per = request.cluster.gpus_per_node
    assert [factors[node * per] for node in range(8)] == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.95, 0.93]
    assert signals["speed_factors"].source == "node_speeds"
    assert "6 at 0.950, 7 at 0.930" in signals["speed_factors"].note


def test_speeds_for_another_number_of_nodes_fall_back_to_the_metric() -> None:
    # Given speeds for 4 nodes on a request planned for 8
    request = _request([1.0, 1.0, 1.0, 0.9])
    # When measured with the slowest-node metric, then the metric is used and the note says why
    measurement, signals = measure(request, Observed(slowest_node_speed=0.93, slowest_node_index=7.0))
    assert signals["speed_factors"].source == "SlowestNodeSpeed"
    assert measurement.speed_factors is not None
    assert measurement.speed_factors[-1] == 0.93
    _, quiet = measure(request, Observed())
    assert "node_speeds lists 4 nodes, the plan's cluster has 8" in quiet["speed_factors"].note


def _last_stage_nodes(aws: Aws) -> list[int]:
    record = record_from_item(_plan_item(aws, "llm") or {})
    stage_nodes = record["stage_nodes"]
    assert stage_nodes is not None
    assert {name: record[name] for name in ("tp", "pp", "dp", "micro_batch", "virtual")} == PLACED.to_dict()
    return list(stage_nodes[-1])


@pytest.mark.parametrize("reported", [False, True], ids=["slowest-node-metric-only", "every-node-reported"])
def test_two_slow_nodes_are_both_kept_off_the_last_stage_only_when_the_job_reports_them(
    aws: Aws, reported: bool
) -> None:
    # Given a job running the planner's pipeline in rank order, nodes 6 and 7 slow, its step measured as such
    assert PLACED.pp == 4
    _job_with_a_slow_last_node(aws, PLACED)
    request = _request(None)
    slow = request.cluster.with_changes(
        speed_factors=slow_node_factors(SPEEDS, request.cluster.gpus_per_node)
    )
    step = evaluate(request.model, slow, PLACED, placement=running(slow, PLACED.pp)).step_time_s
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=step)
    if reported:
        # When the job also hands every node's speed to adjust_parallelism at its decision point
        osprey.adjust_parallelism(660, PLACED, client=aws.dynamodb, environ=_env("llm"), node_speeds=SPEEDS)
        assert json.loads(_request_item(aws, "llm")["node_speeds"]["S"]) == SPEEDS
    report = _run(aws)
    assert report["decisions"] == {"switch": 1}, report
    last = set(_last_stage_nodes(aws))
    if reported:
        # Then neither slow node runs the last (critical) stage
        assert not {6, 7} & last, last
    else:
        # Then, knowing only node 7 (the metric), the plan step moves it and leaves slow node 6 on the last stage
        assert 7 not in last
        assert 6 in last


def _placed_for_nodes_6_and_7(aws: Aws) -> None:
    """The job runs PLACED in rank order and has a record moving its slow nodes 6 and 7 off the last stage."""
    _job_with_a_slow_last_node(aws, PLACED)
    osprey.adjust_parallelism(660, PLACED, client=aws.dynamodb, environ=_env("llm"), node_speeds=SPEEDS)
    request = _request(None)
    slow = request.cluster.with_changes(
        speed_factors=slow_node_factors(SPEEDS, request.cluster.gpus_per_node)
    )
    step = evaluate(request.model, slow, PLACED, placement=running(slow, PLACED.pp)).step_time_s
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=step)
    assert _run(aws)["decisions"] == {"switch": 1}


def _speeds(slow: dict[int, float]) -> list[float]:
    return [slow.get(node, 1.0) for node in range(len(SPEEDS))]


def _last_decision(trace: Path) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(trace.read_text().splitlines()[-1])
    return entry


def test_a_placement_made_for_other_slow_nodes_is_not_applied(aws: Aws, tmp_path: Path) -> None:
    # Given a record placing the job's slow nodes 6 and 7 off the critical stage
    _placed_for_nodes_6_and_7(aws)
    placed_last = _last_stage_nodes(aws)
    trace = tmp_path / "trace.jsonl"
    env = {**_env("llm"), "OSPREY_LOG": str(trace)}
    # When the job, restarted on other hosts, measures a node of the record's last stage slow (and 6, 7 fine)
    elsewhere = _speeds({placed_last[0]: 0.94})
    answer = osprey.adjust_parallelism(720, PLACED, client=aws.dynamodb, environ=env, node_speeds=elsewhere)
    # Then the order is not offered (it would put that node on the critical stage), the trace says why, and
    # the new speeds are on its request for the plan step
    assert answer is None
    assert _last_decision(trace)["decision"] == "placement-stale"
    assert _last_decision(trace)["placement"].startswith("the order would run the critical stage at 0.940")
    assert json.loads(_request_item(aws, "llm")["node_speeds"]["S"]) == elsewhere
    # And when every node has recovered, moving nodes gains nothing: not offered either
    assert (
        osprey.adjust_parallelism(780, PLACED, client=aws.dynamodb, environ=env, node_speeds=_speeds({}))
        is None
    )
    assert _last_decision(trace)["decision"] == "placement-stale"
    # And with node 7 still slow, another slow node elsewhere does not hold the order back (it still takes 7
    # off the critical stage), nor does a job that passes no speeds
    also_slow = _speeds({7: 0.95, 1: 0.9}) if 1 not in placed_last else _speeds({7: 0.95, 3: 0.9})
    assert (
        osprey.adjust_parallelism(840, PLACED, client=aws.dynamodb, environ=env, node_speeds=also_slow)
        == PLACED
    )
    assert _last_decision(trace)["decision"] == "new-placement"
    assert osprey.adjust_parallelism(900, PLACED, client=aws.dynamodb, environ=env) == PLACED


def test_after_a_stale_placement_the_plan_step_places_the_nodes_slow_now(aws: Aws, tmp_path: Path) -> None:
    # Given the record for nodes 6 and 7, and a job whose slow nodes are now one of the record's last stage
    # and node 7 (so the record and rank order would both run a slow node on the critical stage)
    _placed_for_nodes_6_and_7(aws)
    now_slow = {_last_stage_nodes(aws)[0]: 0.94, 7: 0.95}
    env = {**_env("llm"), "OSPREY_LOG": str(tmp_path / "trace.jsonl")}
    speeds = _speeds(now_slow)
    assert (
        osprey.adjust_parallelism(720, PLACED, client=aws.dynamodb, environ=env, node_speeds=speeds) is None
    )
    # When the plan step runs on the speeds the job reported
    report = _run(aws)
    # Then it writes a new order keeping both off the critical stage, which the job is offered
    assert report["decisions"] == {"switch": 1}, report
    assert not set(now_slow) & set(_last_stage_nodes(aws))
    assert (
        osprey.adjust_parallelism(780, PLACED, client=aws.dynamodb, environ=env, node_speeds=speeds) == PLACED
    )


def test_a_new_plan_made_for_other_slow_nodes_comes_in_rank_order(aws: Aws, tmp_path: Path) -> None:
    # Given the same record, read by a job that runs other degrees (it has not adopted the plan yet)
    _placed_for_nodes_6_and_7(aws)
    trace = tmp_path / "trace.jsonl"
    env = {**_env("llm"), "OSPREY_LOG": str(trace)}
    other = PIPELINE  # 8 stages, where the record's plan has 4
    # When a node of the record's last stage is now the slow one
    speeds = _speeds({_last_stage_nodes(aws)[0]: 0.9})
    answer = osprey.adjust_parallelism(720, other, client=aws.dynamodb, environ=env, node_speeds=speeds)
    # Then it gets the plan without the node order (rank order keeps that node off the critical stage)
    assert answer == PLACED
    record = osprey.parallelism.recommended_record()
    assert record is not None
    assert record["stage_nodes"] is None
    assert _last_decision(trace)["decision"] == "new-plan"
    # And with nodes 6 and 7 still the slow ones, it gets the order with the plan
    osprey.adjust_parallelism(780, other, client=aws.dynamodb, environ=env, node_speeds=SPEEDS)
    record = osprey.parallelism.recommended_record()
    assert record is not None
    assert record["stage_nodes"] is not None


def test_a_progress_report_without_speeds_removes_the_earlier_ones(aws: Aws) -> None:
    # Given a job that reported its node speeds
    _job_with_a_slow_last_node(aws, PIPELINE)
    assert (
        report_plan_progress(620, PIPELINE, client=aws.dynamodb, environ=_env("llm"), node_speeds=SPEEDS)
        == "updated"
    )
    assert request_from_item(_request_item(aws, "llm")).node_speeds == tuple(SPEEDS)
    # When its next report carries none (and when it adopts another plan without them)
    assert report_plan_progress(640, PIPELINE, client=aws.dynamodb, environ=_env("llm")) == "updated"
    # Then the request holds no speeds: the plan step never reads an old measurement
    assert "node_speeds" not in _request_item(aws, "llm")
    report_plan_progress(650, PIPELINE, client=aws.dynamodb, environ=_env("llm"), node_speeds=SPEEDS)
    assert report_plan_progress(660, Plan(8, 4, 2, 1), client=aws.dynamodb, environ=_env("llm")) == "adopted"
    assert "node_speeds" not in _request_item(aws, "llm")
    # And bad speeds are refused by name, nothing written (report_plan_progress raises: the caller gave them)
    with pytest.raises(PlanRequestError, match=r"node_speeds\[0\]"):
        report_plan_progress(680, PIPELINE, client=aws.dynamodb, environ=_env("llm"), node_speeds=[-1.0])
    assert request_from_item(_request_item(aws, "llm")).step == 660


def test_adjust_parallelism_with_bad_speeds_still_reports_the_progress(aws: Aws, tmp_path: Path) -> None:
    # Given a job with speeds from an earlier decision point, whose next call passes a speed of zero
    _job_with_a_slow_last_node(aws, PIPELINE)
    env = {**_env("llm"), "OSPREY_LOG": str(tmp_path / "trace.jsonl")}
    osprey.adjust_parallelism(660, PIPELINE, client=aws.dynamodb, environ=env, node_speeds=SPEEDS)
    osprey.adjust_parallelism(720, PIPELINE, client=aws.dynamodb, environ=env, node_speeds=[1.0, 0.0])
    # Then the step is recorded (the plan step needs it), the old speeds are gone, and the trace says why
    item = _request_item(aws, "llm")
    assert item["step"] == {"N": "720"}
    assert "node_speeds" not in item
    last = json.loads((tmp_path / "trace.jsonl").read_text().splitlines()[-1])
    assert last["node_speeds"].startswith("ignored: node_speeds[1]")
    assert last["progress"] == "updated"


def test_a_plan_files_order_is_an_instruction_not_checked_against_the_speeds(
    aws: Aws, tmp_path: Path
) -> None:
    # Given the plan step's record written to a plan file by an operator, and speeds that would hold it back
    _placed_for_nodes_6_and_7(aws)
    record = record_from_item(_plan_item(aws, "llm") or {})
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(record))
    trace = tmp_path / "trace.jsonl"
    env = {"OSPREY_PLAN_FILE": str(plan_file), "OSPREY_LOG": str(trace)}
    speeds = _speeds({_last_stage_nodes(aws)[0]: 0.9})
    # When the job asks, then the order is offered as written
    assert osprey.adjust_parallelism(720, PLACED, environ=env, node_speeds=speeds) == PLACED
    assert _last_decision(trace)["decision"] == "new-placement"
