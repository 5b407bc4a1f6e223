"""Given measured step times of several plans, when the planner calibrates, then it recovers the efficiency
factors that produced them, reports the fit's error before and after, re-ranks with the fitted model; the
plan step does the same from the job's own step time, and ``osprey plan --measured FILE`` offline.

The measured times here are synthetic with a known truth (the cost model with compute at 0.8x and the
network at 0.5x of the calibrated constants), so the test can check that the fit finds it; the published
tables check the model itself (test_validation.py, test_cross_generation.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.cli.plan_output import calibration_line
from osprey_control.planner import DEFAULT_EFFICIENCY, ModelSpec, Plan, PlanRequest, cluster, evaluate, search
from osprey_control.planner.calibrate import Measured, apply_factors, fit
from osprey_control.planner.costmodel import Efficiency
from osprey_control.planner.measure import Observed, measure
from osprey_control.planner.request import build_request, request_from_item
from osprey_control.planner.search import SearchOptions

MODEL = ModelSpec(layers=48, hidden=8192, heads=64, seq=2048, vocab=51200, global_batch=1536)
CLUSTER = cluster(512, instance_type="p4de.24xlarge")
TRUTH = apply_factors(DEFAULT_EFFICIENCY, {"compute": 0.8, "network": 0.5})
PLANS = [
    Plan(8, 2, 32, 4),
    Plan(8, 4, 16, 1, 2),
    Plan(4, 8, 16, 1),
    Plan(2, 8, 32, 1, 3),
    Plan(8, 8, 8, 2),
    Plan(4, 4, 32, 2),
]


# The truth on a stack whose host adds 2 ms to every block pass (eager, blocking launches).
HOST_BOUND = dataclasses.replace(TRUTH, layer_overhead_s=TRUTH.layer_overhead_s + 0.002)


def _measured(plans: list[Plan], truth: Efficiency = TRUTH) -> list[Measured]:
    return [
        Measured(MODEL, plan, evaluate(MODEL, CLUSTER, plan, efficiency=truth).step_time_s) for plan in plans
    ]


def test_the_fit_recovers_the_factors_and_reports_its_error() -> None:
    # Given six plans measured on a cluster slower than the model thinks
    calibration = fit(_measured(PLANS), CLUSTER)
    # Then the fit finds compute 0.8 and network 0.5, and its error falls from over 10% to under 1%
    assert calibration.factors["compute"] == pytest.approx(0.8, rel=0.03)
    assert calibration.factors["network"] == pytest.approx(0.5, rel=0.1)
    summary = calibration.to_dict()
    assert summary["before"]["median_abs_error"] > 0.10  # type: ignore[index]
    assert summary["after"]["max_abs_error"] < 0.01  # type: ignore[index]
    # And the search with the fitted model picks the plan the true model picks
    fitted = search(MODEL, CLUSTER, SearchOptions(efficiency=calibration.efficiency)).best
    truth = search(MODEL, CLUSTER, SearchOptions(efficiency=TRUTH)).best
    assert fitted is not None
    assert truth is not None
    assert fitted.plan == truth.plan


def test_one_measured_plan_fits_only_the_compute_factor() -> None:
    calibration = fit(_measured(PLANS[:1]), CLUSTER)
    assert (calibration.factors["nvlink"], calibration.factors["network"]) == (1.0, 1.0)
    assert abs(calibration.errors_after[0]) < 0.01
    with pytest.raises(ValueError, match="at least one"):
        fit([], CLUSTER)


def test_the_fit_finds_a_fixed_cost_per_micro_batch_when_plans_run_different_counts() -> None:
    # Given plans measured on a stack that pays 30 ms per micro-batch and stage on top of the truth
    measured = _measured(PLANS, dataclasses.replace(TRUTH, micro_batch_overhead_s=0.03))
    # When the planner calibrates on them
    calibration = fit(measured, CLUSTER)
    # Then it recovers the overhead with the factors, and predicts every plan within 1%
    assert calibration.micro_batch_overhead_s == pytest.approx(0.03, rel=0.05)
    assert calibration.factors["compute"] == pytest.approx(0.8, rel=0.03)
    assert calibration.efficiency.micro_batch_overhead_s == pytest.approx(0.03, rel=0.05)
    # (the plans' stages differ in depth, pp 2 to 8, so it is not taken for a cost per block)
    assert calibration.added_layer_overhead_s < 1e-4
    assert max(abs(e) for e in calibration.errors_after) < 0.01
    assert calibration.to_dict()["micro_batch_overhead_s"] == calibration.micro_batch_overhead_s


def test_the_fit_finds_a_fixed_cost_per_block_when_blocks_do_different_work() -> None:
    # Given plans measured on a stack whose host adds 2 ms to every block pass
    measured = _measured(PLANS, HOST_BOUND)
    # When the planner calibrates on them (micro-batch 1 to 4 at tp 2 to 8: blocks of different sizes)
    calibration = fit(measured, CLUSTER)
    # Then it recovers the block cost, not a per-micro-batch one, with the factors
    assert calibration.added_layer_overhead_s == pytest.approx(0.002, rel=0.05)
    assert calibration.efficiency.layer_overhead_s == pytest.approx(HOST_BOUND.layer_overhead_s, rel=0.05)
    assert calibration.micro_batch_overhead_s < 1e-3
    assert calibration.factors["compute"] == pytest.approx(0.8, rel=0.03)
    assert max(abs(e) for e in calibration.errors_after) < 0.01
    # And the report and the table line name it
    assert calibration.to_dict()["added_layer_overhead_s"] == calibration.added_layer_overhead_s
    assert "ms more per block and pass" in calibration_line(calibration)


def test_next_to_a_block_cost_the_micro_batch_cost_needs_stages_of_different_depths() -> None:
    # Given six plans of one pipeline depth (pp 4: 12 blocks per stage), with different micro-batch counts
    # and block sizes, on a stack that pays 2 ms per block pass
    one_depth = [Plan(8, 4, 16, 1), Plan(8, 4, 16, 2), Plan(4, 4, 32, 1), Plan(4, 4, 32, 4),
                 Plan(2, 4, 64, 1), Plan(2, 4, 64, 2)]  # fmt: skip
    measured = _measured(one_depth, HOST_BOUND)
    calibration = fit(measured, CLUSTER)
    # Then per micro-batch and per block the costs are one term, so only the block cost is fitted
    assert calibration.micro_batch_overhead_s == 0.0
    assert calibration.added_layer_overhead_s == pytest.approx(0.002, rel=0.05)
    assert max(abs(e) for e in calibration.errors_after) < 0.01


def test_a_cost_is_fitted_only_from_more_plans_than_free_dimensions() -> None:
    # Given four plans on the host-bound stack: three factors and a block cost would fit them exactly
    measured = _measured(PLANS[:5], HOST_BOUND)
    # Then no cost is fitted from them
    calibration = fit(measured[:4], CLUSTER)
    assert (calibration.added_layer_overhead_s, calibration.micro_batch_overhead_s) == (0.0, 0.0)
    # And a fifth plan allows the block cost (not yet the one per micro-batch), which it finds
    calibration = fit(measured, CLUSTER)
    assert calibration.added_layer_overhead_s == pytest.approx(0.002, rel=0.05)
    assert calibration.micro_batch_overhead_s == 0.0


@pytest.mark.parametrize(
    ("plans", "cost", "line"),
    [
        # b / tp = 1/2 in every plan: every block does the same work
        ([Plan(8, 2, 32, 4), Plan(4, 4, 32, 2), Plan(2, 8, 32, 1), Plan(8, 4, 16, 4), Plan(4, 2, 64, 2)],
         "added_layer_overhead_s", "per block"),
        # 12 micro-batches per pipeline in every plan
        ([Plan(8, 2, 32, 4), Plan(4, 4, 32, 4), Plan(2, 8, 32, 4), Plan(8, 4, 16, 8), Plan(4, 8, 16, 8)],
         "micro_batch_overhead_s", "per micro-batch"),
    ],
    ids=["blocks-of-one-size", "one-micro-batch-count"],
)  # fmt: skip
def test_a_cost_the_plans_cannot_separate_from_compute_is_not_fitted(
    plans: list[Plan], cost: str, line: str
) -> None:
    # Given five plans (enough for a cost) that all do the same work per block, or run as many micro-batches
    calibration = fit(_measured(plans), CLUSTER)
    # Then nothing separates that cost from compute: it stays 0, the factors explain the times, and the
    # table line does not mention it
    assert getattr(calibration, cost) == 0.0
    assert max(abs(e) for e in calibration.errors_after) < 0.01
    assert line not in calibration_line(calibration)


def _request() -> PlanRequest:
    model = {"layers": 48, "hidden": 8192, "heads": 64, "seq": 2048, "vocab": 51200, "global_batch": 1536,
             "recompute": "full", "sequence_parallel": "off", "optimizer_sharding": "none",
             "flash_attention": "off", "comm_overlap": "off"}  # fmt: skip
    item = build_request(
        "JOB#batch#llm",
        model=model,
        cluster="p4de.24xlarge",
        current=PLANS[0],
        gpus=512,
        step=600,
        since_step=0,
    )
    return request_from_item(item)


def test_the_plan_step_calibrates_from_a_step_faster_than_predicted() -> None:
    request = _request()
    predicted = evaluate(request.model, request.cluster, request.current).step_time_s
    # Given the job runs 20% faster than the model predicts (better kernels, say)
    measurement, signals = measure(request, Observed(latency_us=15.0, step_time_s=0.8 * predicted))
    # Then the compute factor is fitted (above 1.25: communication does not speed up with it), the signal
    # reports it and the error, and replanning uses it
    assert signals["calibration"].source == "StepTimeSeconds"
    fitted_factor = signals["calibration"].value
    assert fitted_factor is not None
    assert fitted_factor > 1.25
    assert "-> +0.0%" in signals["calibration"].note or "-> -0.0%" in signals["calibration"].note
    assert measurement.efficiency is not None
    refit = evaluate(request.model, request.cluster, request.current, efficiency=measurement.efficiency)
    assert refit.step_time_s == pytest.approx(0.8 * predicted, rel=0.01)
    # And a step within the tolerance is not calibrated
    same, signals = measure(request, Observed(latency_us=15.0, step_time_s=predicted))
    assert same.efficiency is None
    assert signals["calibration"].value is None


runner = CliRunner()
FLAGS = [
    "--layers", "48", "--hidden", "8192", "--heads", "64", "--seq", "2048", "--vocab", "51200",
    "--global-batch", "1536", "--gpus", "512", "--instance-type", "p4de.24xlarge",
    "--recompute", "full", "--sequence-parallel", "off", "--optimizer-sharding", "none",
    "--flash-attention", "off", "--comm-overlap", "off",
]  # fmt: skip


def test_osprey_plan_measured_fits_ranks_and_reports(tmp_path: Path) -> None:
    # Given a CSV of measured step times per plan
    path = tmp_path / "measured.csv"
    rows = ["tp,pp,micro_batch,virtual,step_time_s"] + [
        f"{m.plan.tp},{m.plan.pp},{m.plan.micro_batch},{m.plan.virtual},{m.step_time_s}"
        for m in _measured(PLANS)
    ]
    path.write_text("\n".join(rows) + "\n")
    # When osprey plan is given it
    result = runner.invoke(app, ["plan", *FLAGS, "--measured", str(path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    # Then the JSON carries the fit (6 points, its error before and after) and the ranking uses it
    calibration = out["calibration"]
    assert calibration["points"] == 6
    assert calibration["factors"]["compute"] == pytest.approx(0.8, rel=0.03)
    assert calibration["after"]["max_abs_error"] < 0.01
    truth = search(MODEL, CLUSTER, SearchOptions(efficiency=TRUTH)).best
    assert truth is not None
    assert (out["best"]["tp"], out["best"]["pp"], out["best"]["micro_batch"]) == (
        truth.plan.tp,
        truth.plan.pp,
        truth.plan.micro_batch,
    )
    # And the table says so in one line
    table = runner.invoke(app, ["plan", *FLAGS, "--measured", str(path)])
    assert "calibrated on 6 measured plan(s): compute x0.8" in table.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tp,pp,micro_batch\n8,2,4\n", "row 1: step_time_s is required"),
        ("tp,pp,micro_batch,step_time_s\n8,3,4,10\n", "row 1: tp*pp = 24 must divide the 512 GPUs"),
        (
            '[{"tp": 8, "pp": 2, "micro_batch": 4, "step_time_s": -1}]',
            "row 1: step_time_s must be a positive",
        ),
        (
            '[{"tp": 8, "pp": 2, "micro_batch": 4, "step_time_s": 9, "colour": 1}]',
            "row 1: unknown field 'colour'",
        ),
        ("", "no measured plans"),
    ],
)
def test_a_bad_measured_file_names_the_row_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "measured.csv"
    path.write_text(text)
    result = runner.invoke(app, ["plan", *FLAGS, "--measured", str(path)])
    assert result.exit_code == 1
    assert f"error: --measured {path}: {message}" in result.stderr


def test_calibrated_efficiency_is_a_plain_efficiency() -> None:
    # The fitted model is the same dataclass, usable anywhere an Efficiency is
    fitted = apply_factors(DEFAULT_EFFICIENCY, {"compute": 2.0})
    assert dataclasses.replace(fitted).gemm_scale == 2.0


def test_a_straggler_in_the_order_the_job_ran_is_not_taken_for_slow_compute() -> None:
    # Given a pipeline that ran with its last node 10% slow, once in rank order and once placed
    from osprey_control.planner.placement import place, speed_factors_with_slow_node  # noqa: PLC0415

    slow = CLUSTER.with_changes(speed_factors=speed_factors_with_slow_node(CLUSTER, CLUSTER.nodes - 1, 0.9))
    plan = Plan(8, 8, 8, 1)
    rank_order = evaluate(MODEL, slow, plan, placement="rank-order").step_time_s
    order = place(slow, plan.pp).stage_nodes
    placed = evaluate(MODEL, slow, plan, placement="auto").step_time_s
    assert rank_order > placed
    # When each is calibrated in the order it ran
    for measured in (Measured(MODEL, plan, rank_order), Measured(MODEL, plan, placed, order)):
        calibration = fit([measured], slow)
        # Then the model needs no correction: the straggler explains the step, not the GPUs' speed
        assert calibration.factors["compute"] == pytest.approx(1.0, abs=0.005)
        assert abs(calibration.errors_before[0]) < 1e-9


def test_a_link_factor_stops_at_the_links_nominal_bandwidth() -> None:
    # Given plans measured on a network that reaches its full nominal bandwidth (0.8 x 1.25 = 1.0)
    fast_network = apply_factors(DEFAULT_EFFICIENCY, {"network": 1.25})
    calibration = fit(_measured(PLANS, fast_network), CLUSTER)
    # Then the fit finds it, and reports no factor past nominal (where the model is flat and says nothing)
    assert calibration.factors["network"] == pytest.approx(1.25, rel=0.02)
    assert calibration.factors["network"] <= 1.0 / DEFAULT_EFFICIENCY.network + 1e-9
    assert max(abs(e) for e in calibration.errors_after) < 0.01
