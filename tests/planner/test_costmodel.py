"""Given a model and a cluster, when the cost model evaluates a plan, then each term behaves as its
physics says: bubble (p-1)/(v m), memory per recompute mode and ZeRO-1, the headroom limit, cross-node
tensor parallelism, and the slowest GPU governing its stage."""

from __future__ import annotations

import dataclasses

import pytest

from osprey_control.planner import (
    DEFAULT_EFFICIENCY,
    GPUS,
    INSTANCE_TYPES,
    ModelSpec,
    OptimizerSharding,
    Plan,
    PlanError,
    Precision,
    Recompute,
    cluster,
    evaluate,
)
from osprey_control.planner.gemm import depth_factor

MODEL = ModelSpec(layers=48, hidden=8192, heads=64, seq=2048, vocab=51200, global_batch=512)
CLUSTER = cluster(64, instance_type="p4de.24xlarge")


def test_bubble_fraction_is_p_minus_1_over_m_and_shrinks_with_interleaving() -> None:
    plain = evaluate(MODEL, CLUSTER, Plan(8, 4, 2, 2, 1))
    interleaved = evaluate(MODEL, CLUSTER, Plan(8, 4, 2, 2, 3))
    assert plain.micro_batches == 128
    assert plain.bubble_fraction == pytest.approx(3 / 128)
    assert interleaved.bubble_fraction == pytest.approx(3 / (3 * 128))
    assert interleaved.bubble_s < plain.bubble_s


def test_breakdown_adds_up_to_the_step_time() -> None:
    e = evaluate(MODEL, CLUSTER, Plan(4, 4, 4, 1, 2))
    parts = e.compute_s + e.tp_comm_s + e.pp_comm_s + e.bubble_s + e.dp_exposed_s + e.optimizer_s
    assert parts == pytest.approx(e.step_time_s)
    assert e.schedule_s == 0.0


def test_a_per_micro_batch_overhead_is_paid_by_every_micro_batch_and_in_the_bubble() -> None:
    # Given a stack that pays 20 ms per micro-batch and stage (calibrated; 0 by default)
    plan = Plan(4, 4, 4, 1)
    nominal = evaluate(MODEL, CLUSTER, plan)
    slow = evaluate(
        MODEL, CLUSTER, plan, efficiency=dataclasses.replace(DEFAULT_EFFICIENCY, micro_batch_overhead_s=0.02)
    )
    # Then the step grows by 20 ms per micro-batch slot, m steady-state ones plus the pp - 1 of the bubble
    assert slow.schedule_s == pytest.approx(0.02 * slow.micro_batches)
    added = slow.step_time_s - nominal.step_time_s
    assert added == pytest.approx(0.02 * (slow.micro_batches + plan.pp - 1))
    parts = slow.compute_s + slow.tp_comm_s + slow.pp_comm_s + slow.schedule_s + slow.bubble_s
    assert parts + slow.dp_exposed_s + slow.optimizer_s == pytest.approx(slow.step_time_s)
    assert slow.to_dict()["breakdown"]["schedule_s"] == slow.schedule_s  # type: ignore[index]


def test_full_recompute_hardware_flops_match_the_sc21_formula() -> None:
    b, s, n, h, v = MODEL.global_batch, MODEL.seq, MODEL.layers, MODEL.hidden, MODEL.vocab
    expected = 96 * b * s * n * h * h * (1 + s / (6 * h) + v / (16 * n * h))
    assert MODEL.hardware_flops_per_iteration() == pytest.approx(expected)
    none = dataclasses.replace(MODEL, recompute=Recompute.NONE)
    assert none.hardware_flops_per_iteration() == pytest.approx(none.model_flops_per_iteration())


def test_activation_memory_orders_none_above_selective_above_full() -> None:
    plan = Plan(8, 4, 2, 1, 1)
    memory = {
        mode: evaluate(dataclasses.replace(MODEL, recompute=mode), CLUSTER, plan).activations_gib
        for mode in Recompute
    }
    assert memory[Recompute.NONE] > memory[Recompute.SELECTIVE] > memory[Recompute.FULL]


def test_zero1_divides_the_optimizer_states_by_dp() -> None:
    plan = Plan(8, 1, 8, 1, 1)
    plain = evaluate(MODEL, CLUSTER, plan)
    zero = evaluate(dataclasses.replace(MODEL, optimizer_sharding=OptimizerSharding.ZERO1), CLUSTER, plan)
    assert plain.layer_states_gib / zero.layer_states_gib == pytest.approx(18 / (2 + 4 + 12 / 8))
    sixteen = dataclasses.replace(MODEL, fp32_grad_accumulation=False)
    assert evaluate(sixteen, CLUSTER, plan).layer_states_gib / plain.layer_states_gib == pytest.approx(
        16 / 18
    )


def test_plans_above_the_headroom_are_infeasible_and_the_headroom_is_configurable() -> None:
    plan = Plan(8, 1, 8, 1, 1)
    e = evaluate(MODEL, CLUSTER, plan)
    assert e.memory_gib_per_gpu > 0.9 * 80
    assert not e.feasible
    assert "GiB" in e.reason
    loose = evaluate(MODEL, CLUSTER, plan, memory_headroom=1.0)
    assert loose.memory_limit_gib == pytest.approx(80.0)
    fits = evaluate(MODEL, CLUSTER, Plan(8, 4, 2, 1, 1))
    assert fits.feasible
    assert fits.memory_gib_per_gpu <= fits.memory_limit_gib


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (Plan(3, 1, 21, 1, 1), r"tp\*pp\*dp"),
        (Plan(16, 1, 4, 1, 1), "exceeds"),
        (Plan(8, 5, 2, 1, 1), r"tp\*pp\*dp"),
        (Plan(8, 8, 1, 3, 1), "not divisible"),
        (Plan(8, 1, 8, 1, 2), "pp > 1"),
        (Plan(8, 4, 2, 1, 5), "chunks"),
    ],
)
def test_invalid_layouts_raise_naming_the_constraint(plan: Plan, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        evaluate(MODEL, CLUSTER, plan)


def test_cross_node_tensor_parallelism_only_when_allowed_and_slower_than_inside_a_node() -> None:
    model = dataclasses.replace(MODEL, heads=128)
    allowed = cluster(64, instance_type="p4de.24xlarge", allow_cross_node_tp=True)
    across = evaluate(model, allowed, Plan(16, 4, 1, 1, 1))
    inside = evaluate(model, allowed, Plan(8, 8, 1, 1, 1))
    assert across.tp_comm_s > 5 * inside.tp_comm_s
    with pytest.raises(PlanError, match="cross-node"):
        evaluate(model, CLUSTER, Plan(16, 4, 1, 1, 1))


def test_the_slowest_gpu_governs_its_stage() -> None:
    plan = Plan(8, 4, 2, 1, 1)
    factors = [1.0] * 64
    factors[5] = 0.5
    straggler = cluster(64, instance_type="p4de.24xlarge", speed_factors=factors)
    nominal = evaluate(MODEL, CLUSTER, plan)
    slowed = evaluate(MODEL, straggler, plan)
    assert slowed.compute_s == pytest.approx(2 * nominal.compute_s, rel=0.1)
    assert slowed.step_time_s > 1.5 * nominal.step_time_s


def test_a_slower_network_lengthens_the_data_parallel_all_reduce() -> None:
    plan = Plan(8, 4, 2, 1, 1)
    fast = evaluate(MODEL, CLUSTER, plan)
    slow = evaluate(MODEL, CLUSTER.with_changes(network_gbits=100.0), plan)
    assert slow.dp_comm_s == pytest.approx(4 * fast.dp_comm_s, rel=0.05)


def test_presets_and_overrides() -> None:
    assert set(INSTANCE_TYPES) == {
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "p6-b200.48xlarge",
    }
    assert set(GPUS) == {"V100", "A100-40GB", "A100-80GB", "H100", "H200", "B200"}
    p5 = cluster(16, instance_type="p5.48xlarge", peak_tflops=800.0, gpu_memory_gib=70.0)
    assert (p5.gpu.name, p5.gpu.peak_tflops, p5.gpu.memory_gib, p5.nodes) == ("H100", 800.0, 70.0, 2)
    with pytest.raises(ValueError, match="unknown instance type"):
        cluster(8, instance_type="p9.huge")
    with pytest.raises(ValueError, match="multiple of gpus per node"):
        cluster(12, instance_type="p4d.24xlarge")


def test_fp8_needs_fp8_tensor_cores_and_bf16_is_refused_on_v100() -> None:
    fp8 = dataclasses.replace(MODEL, precision=Precision.FP8)
    h100 = cluster(64, instance_type="p5.48xlarge")
    assert (
        evaluate(fp8, h100, Plan(8, 4, 2, 1, 1)).compute_s
        < evaluate(MODEL, h100, Plan(8, 4, 2, 1, 1)).compute_s
    )
    with pytest.raises(PlanError, match="FP8"):
        evaluate(fp8, CLUSTER, Plan(8, 4, 2, 1, 1))
    v100 = cluster(64, gpu="V100", network_gbits=100)
    with pytest.raises(PlanError, match="bf16"):
        evaluate(MODEL, v100, Plan(8, 4, 2, 1, 1))


def test_the_gemm_depth_constant_reproduces_the_measured_hopper_gemms() -> None:
    # Given tile-lang's FP16 GEMMs on an H800 (M = N = 8192): 766, 736 and 628 TFLOP/s at K = 16384, 4096, 1024
    half_depth = DEFAULT_EFFICIENCY.gemm_half_depth * 989.0 / DEFAULT_EFFICIENCY.gemm_reference_tflops

    def rate(k: float) -> float:
        return k / (k + half_depth)

    # Then the depth term at the H100's peak gives the measured ratios within 1.5%
    assert rate(4096) / rate(16384) == pytest.approx(736 / 766, rel=0.015)
    assert rate(1024) / rate(16384) == pytest.approx(628 / 766, rel=0.015)


def test_shallow_gemms_cost_more_per_flop_for_narrow_blocks_and_wide_tensor_parallelism() -> None:
    # Given the block GEMMs' depths (h, h/tp, h, 4h/tp forward; 3h/tp, h, 4h/tp, h for the input gradients)
    narrow = dataclasses.replace(MODEL, hidden=2048, heads=16)
    wide = dataclasses.replace(MODEL, hidden=12288, heads=96)
    k0 = 243.0
    # Then a hidden-2048 block pays more than a hidden-12288 one, tp 8 more than tp 1, and no depth none
    assert depth_factor(narrow, 4, 1, 3.0, k0) > depth_factor(wide, 4, 1, 3.0, k0) > 1.0
    assert depth_factor(wide, 4, 8, 4.0, k0) > depth_factor(wide, 4, 1, 4.0, k0)
    assert depth_factor(narrow, 4, 8, 3.0, 0.0) == 1.0
    # And the factor is the FLOP-weighted stretch at tp 1 without recompute: forward (QKV, projection, FC1 at
    # K = h, FC2 at 4h), input gradients (3h, h, 4h, h), weight gradients (K = s b), over three passes
    h, tokens = 2048.0, narrow.seq * 4.0
    forward = (8 / 12) * (1 + k0 / h) + (4 / 12) * (1 + k0 / (4 * h))
    backward = (3 / 12) * (1 + k0 / (3 * h)) + (5 / 12) * (1 + k0 / h) + (4 / 12) * (1 + k0 / (4 * h))
    expected = (forward + backward + 1 + k0 / tokens) / 3
    assert depth_factor(narrow, 4, 1, 3.0, k0) == pytest.approx(expected)
