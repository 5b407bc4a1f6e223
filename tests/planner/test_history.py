"""Given a job that has run several plans, when the plan step measures it again, then it keeps the step time of
each plan on the job's plan request (one entry per plan, at most eight) and fits the cost model to all of them,
not just to the plan running now (issue #18: the plan step calibrates from the job's own step times)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from osprey.planning import report_plan_progress
from osprey_control.planner import DEFAULT_EFFICIENCY, Plan, evaluate
from osprey_control.planner.calibrate import apply_factors
from osprey_control.planner.history import (
    MAX_MEASURED_PLANS,
    MeasuredStep,
    history_from_item,
    history_item,
    with_measurement,
)
from osprey_control.planner.measure import Observed, measure
from osprey_control.planner.order import parse_plan_key, plan_key
from osprey_control.planner.placement import place, running, speed_factors_with_slow_node
from osprey_control.planner.request import build_request, request_from_item
from tests.planner.conftest import Aws
from tests.planner.test_step import CURRENT, MODEL, _env, _job, _request_item, _run, _runtime_metrics

# The job's GPUs run 25% faster than the calibrated model (newer kernels, say); the network is as nominal.
TRUTH = apply_factors(DEFAULT_EFFICIENCY, {"compute": 1.25})
OTHER = Plan(tp=4, pp=1, dp=16, micro_batch=8)
# A 70B-class model on 8 p5.48xlarge nodes, one node per pipeline stage (tests/planner/test_placement_switch.py).
STRAGGLER_MODEL = {"layers": 80, "hidden": 8192, "heads": 64, "seq": 4096, "vocab": 131072, "global_batch": 64,
                   "recompute": "selective", "sequence_parallel": "on", "optimizer_sharding": "zero1",
                   "flash_attention": "on", "comm_overlap": "on"}  # fmt: skip
PIPELINE = Plan(tp=8, pp=8, dp=1, micro_batch=1)


def _true_step(plan: Plan) -> float:
    request = request_from_item(
        build_request("JOB#batch#x", model=MODEL, cluster="p4de.24xlarge", current=CURRENT)
    )
    return evaluate(request.model, request.cluster, plan, efficiency=TRUTH).step_time_s


def test_the_history_keeps_one_entry_per_plan_and_drops_the_oldest_beyond_eight() -> None:
    # Given a job measured on ten plans, one of them twice
    history: tuple[MeasuredStep, ...] = ()
    for index in range(10):
        history = with_measurement(
            history, MeasuredStep(Plan(1, 1, 64, index + 1), 10.0 + index, f"t{index:02}")
        )
    history = with_measurement(history, MeasuredStep(Plan(1, 1, 64, 10), 99.0, "t99"))
    # Then the latest eight plans are kept, the re-measured one with its latest time, and they survive the item
    assert len(history) == MAX_MEASURED_PLANS
    assert [entry.plan.micro_batch for entry in history] == [3, 4, 5, 6, 7, 8, 9, 10]
    assert history[-1].step_time_s == 99.0
    assert history_from_item({"measured": history_item(history)}) == history


def test_an_unreadable_entry_costs_only_that_entry() -> None:
    # Given a hand-edited item with a bad key, a bad number and a good entry
    good = history_item([MeasuredStep(CURRENT, 12.5, "2026-12-04T10:00:00Z")])["M"]
    item = {
        "measured": {
            "M": {
                "2,1,32": {"M": {"step_time_s": {"N": "3"}, "at": {"S": "x"}}},
                "2,1,32,16,0": {"M": {"step_time_s": {"N": "3"}, "at": {"S": "x"}}},
                "4,1,16,8,1": {"M": {"step_time_s": {"N": "-1"}, "at": {"S": "x"}}},
                **good,
            }
        }
    }
    # Then the good entry is read and the others are skipped
    assert history_from_item(item) == (MeasuredStep(CURRENT, 12.5, "2026-12-04T10:00:00Z"),)
    assert history_from_item({}) == ()
    assert history_from_item({"measured": {"S": "not a map"}}) == ()


def test_the_plan_step_records_each_plan_and_fits_the_job_on_all_of_them(aws: Aws) -> None:
    # Given a job on CURRENT whose steps run as the faster truth says
    _job(aws, "llm")
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=_true_step(CURRENT))
    # When the plan step runs
    first = _run(aws, now=datetime.now(UTC) - timedelta(minutes=1))
    # Then the request holds the measured step of CURRENT, and the fit used that one plan
    (entry,) = history_from_item(_request_item(aws, "llm"))
    assert entry.plan == CURRENT
    assert entry.step_time_s == pytest.approx(_true_step(CURRENT))
    assert "fitted to the measured step" in first["calibrations"][0]["fit"]
    # Given the job then adopts another plan and reports its step time
    assert report_plan_progress(1200, OTHER, client=aws.dynamodb, environ=_env("llm")) == "adopted"
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=_true_step(OTHER), minutes_ago=1)
    # When the plan step runs before the job has run the new plan for its interval (60 steps)
    early = _run(aws)
    # Then the new plan's step time is neither fitted nor recorded (the latest minute may still mix the two)
    assert early["calibrated"] == 0
    assert [e.plan for e in history_from_item(_request_item(aws, "llm"))] == [CURRENT]
    # Given the job 100 steps into the new plan
    assert report_plan_progress(1300, OTHER, client=aws.dynamodb, environ=_env("llm")) == "updated"
    # When the plan step runs again
    second = _run(aws)
    # Then both plans are on the request, and the job's model is fitted to both: the compute factor of the
    # truth, every plan within 1%
    history = history_from_item(_request_item(aws, "llm"))
    assert [e.plan for e in history] == [CURRENT, OTHER]
    (calibration,) = second["calibrations"]
    assert "fitted to the job's 2 measured plans" in calibration["fit"]
    assert calibration["compute_factor"] == pytest.approx(1.25, rel=0.02)
    assert "largest 0.0%" in calibration["fit"], calibration["fit"]


def test_a_job_measured_as_predicted_on_one_plan_is_not_calibrated_and_keeps_its_measurement(
    aws: Aws,
) -> None:
    # Given a job whose step is exactly what the calibrated model predicts
    _job(aws, "llm")
    request = request_from_item(
        build_request("JOB#batch#x", model=MODEL, cluster="p4de.24xlarge", current=CURRENT)
    )
    predicted = evaluate(request.model, request.cluster, CURRENT).step_time_s
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=predicted)
    # When the plan step runs
    report = _run(aws)
    # Then nothing is fitted, but the measurement is kept for a later fit
    assert report["calibrated"] == 0
    (entry,) = history_from_item(_request_item(aws, "llm"))
    assert entry.step_time_s == pytest.approx(predicted)
    # And a job with no step time gets no entry
    _job(aws, "quiet")
    _run(aws)
    assert history_from_item(_request_item(aws, "quiet")) == ()
    assert dataclasses.replace(entry, step_time_s=1.0).key == "2,1,32,16,1"


def test_the_same_degrees_in_rank_order_and_placed_are_two_entries_that_survive_the_item() -> None:
    # Given a job measured on a pipeline in rank order, then on the same degrees with nodes 2 and 3 swapped
    pipeline = Plan(tp=8, pp=4, dp=1, micro_batch=1)
    placed = ((0,), (1,), (3,), (2,))
    history = with_measurement((), MeasuredStep(pipeline, 10.5, "t1"))
    history = with_measurement(history, MeasuredStep(pipeline, 10.0, "t2", placed))
    # Then both are kept, each with its order, and read back as written
    assert [(e.key, e.stage_nodes) for e in history] == [("8,4,1,1,1", ()), ("8,4,1,1,1|0;1;3;2", placed)]
    assert history_from_item({"measured": history_item(history)}) == history
    # And re-measuring the placed order replaces only its own entry
    history = with_measurement(history, MeasuredStep(pipeline, 9.9, "t3", placed))
    assert [e.step_time_s for e in history] == [10.5, 9.9]


def test_a_plan_key_reads_back_as_its_plan_and_order_and_a_broken_one_is_named() -> None:
    pipeline = Plan(tp=8, pp=4, dp=1, micro_batch=1)
    assert parse_plan_key(plan_key(pipeline, [[0], [1], [3], [2]])) == (pipeline, ((0,), (1,), (3,), (2,)))
    assert parse_plan_key(plan_key(pipeline)) == (pipeline, ())
    for broken in ("8,4,1", "8,4,1,1,0", "8,4,1,1,1|0;x", "8,4,1,1,1|0;-1"):
        with pytest.raises(ValueError, match="plan key"):
            parse_plan_key(broken)


@pytest.mark.parametrize(
    "placed_first", [False, True], ids=["rank-order-then-placed", "placed-then-rank-order"]
)
def test_a_straggler_moved_off_the_critical_stage_is_not_taken_for_slow_compute(placed_first: bool) -> None:
    # Given a job whose GPUs run 10% faster than the model says and whose last node is 5% slow: it ran its
    # pipeline in rank order (the straggler on the critical stage) and with the straggler moved, in either order
    request = request_from_item(
        build_request("JOB#batch#x", model=STRAGGLER_MODEL, cluster="p5.48xlarge", current=PIPELINE)
    )
    slow = request.cluster.with_changes(speed_factors=speed_factors_with_slow_node(request.cluster, 7, 0.95))
    placed = place(slow, PIPELINE.pp)
    assert placed.moved
    truth = apply_factors(DEFAULT_EFFICIENCY, {"compute": 1.1})

    def true_step(order: tuple[tuple[int, ...], ...]) -> float:
        placement = running(slow, PIPELINE.pp, order)
        return evaluate(request.model, slow, PIPELINE, efficiency=truth, placement=placement).step_time_s

    assert true_step(()) > true_step(placed.stage_nodes) * 1.02
    item = build_request(
        "JOB#batch#x",
        model=STRAGGLER_MODEL,
        cluster="p5.48xlarge",
        current=PIPELINE,
        step=700,
        since_step=600,
    )
    earlier, now = ((), placed.stage_nodes) if not placed_first else (placed.stage_nodes, ())
    if now:
        item["current_stage_nodes"] = {"S": json.dumps([list(stage) for stage in now])}
    item["measured"] = history_item([MeasuredStep(PIPELINE, true_step(earlier), "t1", earlier)])
    job = request_from_item(item)
    # When the plan step measures the step of the order it runs now, with the straggler signal
    observed = Observed(
        latency_us=request.cluster.network_latency_us,
        step_time_s=true_step(now),
        slowest_node_speed=0.95,
        slowest_node_index=7.0,
    )
    _, signals = measure(job, observed)
    # Then both measurements are fitted, each in the order it ran: the compute factor is the truth's and both
    # steps are explained (the rank-order step is slower because of the straggler, not because of slower GPUs)
    calibration = signals["calibration"]
    assert calibration.value == pytest.approx(1.1, rel=0.02), calibration.note
    assert "fitted to the job's 2 measured plans" in calibration.note
    assert "largest 0.0%" in calibration.note, calibration.note
