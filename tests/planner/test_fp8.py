"""Given a model trained in FP8 (Transformer Engine's recipe) or in bf16, when the cost model evaluates it,
then FP8 GEMMs run at their own measured efficiency (``Efficiency.gemm_fp8``), so a GEMM-bound block gains
less than the 2x of the peaks; the casts Transformer Engine adds are paid at HBM speed, counted per tensor;
Blackwell needs no transposed copies; bf16 plans do not depend on any FP8 constant; and calibration's compute
factor scales the FP8 terms too."""

from __future__ import annotations

import dataclasses

import pytest

from osprey_control.planner import DEFAULT_EFFICIENCY, GPUS, ModelSpec, Plan, Recompute, cluster, evaluate
from osprey_control.planner.calibrate import apply_factors
from osprey_control.planner.model import Precision

# GPT-3 5B as NeMo trains it (a small vocabulary keeps the 16-bit output layer out of the way).
GPT5B = ModelSpec(
    layers=24,
    hidden=4096,
    heads=32,
    seq=2048,
    vocab=51200,
    global_batch=512,
    recompute=Recompute.NONE,
    flash_attention=True,
    comm_overlap=True,
)
H100 = cluster(64, instance_type="p5.48xlarge")
PLAN = Plan(1, 1, 64, 4)
# Everything but the GEMMs made free: a GEMM-bound block.
GEMMS_ONLY = dataclasses.replace(
    DEFAULT_EFFICIENCY,
    memory_touches=0.0,
    layer_overhead_s=0.0,
    flash_attention=1e9,
    loss_bytes_per_logit=0.0,
    fp8_cast_bytes=0.0,
    fp8_transpose_bytes=0.0,
    gemm_half_depth=0.0,
)
NO_CASTS = dataclasses.replace(DEFAULT_EFFICIENCY, fp8_cast_bytes=0.0, fp8_transpose_bytes=0.0)


def _fp8(model: ModelSpec) -> ModelSpec:
    return dataclasses.replace(model, precision=Precision.FP8)


def test_a_gemm_bound_block_gains_what_the_fp8_gemm_efficiency_says_not_the_2x_of_the_peaks() -> None:
    # Given a block whose only cost is its GEMMs, on an H100 (989 bf16, 1979 fp8 TFLOP/s dense)
    model = dataclasses.replace(GPT5B, vocab=64)
    bf16 = evaluate(model, H100, PLAN, efficiency=GEMMS_ONLY)
    fp8 = evaluate(_fp8(model), H100, PLAN, efficiency=GEMMS_ONLY)
    # When it runs in FP8, then it speeds up by the ratio of the two large-GEMM rates: 1979 x 0.72 over
    # 989 x 0.72, the measured 2.0x of per-tensor scaled FP8 GEMMs on Hopper (tile-lang, K >= 4096)
    h100 = GPUS["H100"]
    assert h100.peak_tflops_fp8 is not None
    assert h100.gemm_efficiency is not None
    expected = h100.peak_tflops_fp8 * DEFAULT_EFFICIENCY.gemm_fp8 / (h100.peak_tflops * h100.gemm_efficiency)
    speedup = bf16.compute_s / fp8.compute_s
    assert speedup == pytest.approx(expected, rel=1e-3)
    assert speedup == pytest.approx(2.0, abs=0.01)


def test_transformer_engine_casts_cost_six_bytes_per_element_of_sixteen_tensors_per_block() -> None:
    # Given the 5B model at tp 1 without recompute: per block and micro-batch TE casts 7 s b h elements
    # forward (QKV, projection, FC1 inputs; FC2's 4h input) and 9 backward (the output gradients 3h, h, 4h, h);
    # each costs an amax read (2 bytes), a cast read (2) and the row-wise and transposed FP8 writes (1 + 1)
    without = evaluate(_fp8(GPT5B), H100, PLAN, efficiency=NO_CASTS)
    with_casts = evaluate(_fp8(GPT5B), H100, PLAN)
    sbh = GPT5B.seq * PLAN.micro_batch * GPT5B.hidden
    hbm = GPUS["H100"].hbm_gbytes * 1e9
    per_block_s = 6.0 * 16 * sbh / hbm
    # Then every micro-batch pays them on every block, at HBM bandwidth
    assert with_casts.compute_s - without.compute_s == pytest.approx(
        with_casts.micro_batches * GPT5B.layers * per_block_s, rel=1e-9
    )
    # And the weights are cast once per step (Transformer Engine caches them across micro-batches)
    weights_s = GPT5B.layers * GPT5B.layer_params * 6.0 / hbm
    assert with_casts.optimizer_s - without.optimizer_s == pytest.approx(weights_s, rel=1e-9)
    # And the whole is still slower than bf16 at 2x: FP8 gains about 1.4x on this small model
    bf16 = evaluate(GPT5B, H100, PLAN)
    assert 1.2 < bf16.step_time_s / with_casts.step_time_s < 1.6


def _cast_s_per_block(model: ModelSpec, on: str, plan: Plan) -> float:
    where = cluster(64, instance_type=on)
    e = evaluate(_fp8(model), where, plan)
    without = evaluate(_fp8(model), where, plan, efficiency=NO_CASTS)
    return (e.compute_s - without.compute_s) / (e.micro_batches * model.layers)


def test_recompute_casts_the_forward_again_and_sequence_parallelism_casts_the_local_shard() -> None:
    plan = Plan(2, 1, 32, 4)
    sbh = GPT5B.seq * plan.micro_batch * GPT5B.hidden
    hbm = GPUS["H100"].hbm_gbytes * 1e9
    # Full recompute at tp 2: the forward's casts twice (2 x (2 + 5/2) s b h), the backward's once (2 + 7/2)
    full = dataclasses.replace(GPT5B, recompute=Recompute.FULL)
    assert _cast_s_per_block(full, "p5.48xlarge", plan) == pytest.approx(
        6.0 * (2 * 4.5 + 5.5) * sbh / hbm, rel=1e-9
    )
    # Sequence parallelism: the 12 s b h / t sharded anyway at 6 bytes; the 4 s b h otherwise replicated
    # are cast on the local shard (5 bytes / t) and, once gathered, transposed (1 byte read, 1 written)
    sp = dataclasses.replace(GPT5B, sequence_parallel=True)
    assert _cast_s_per_block(sp, "p5.48xlarge", plan) == pytest.approx(
        (6.0 * 12 / 2 + 4 * (5.0 / 2 + 2.0)) * sbh / hbm, rel=1e-9
    )


def test_blackwell_reads_either_layout_so_no_transposed_copy_is_written() -> None:
    # Given the same block on a B200, whose FP8 GEMMs take both layouts (no physical transpose)
    plan = Plan(2, 1, 32, 4)
    sbh = GPT5B.seq * plan.micro_batch * GPT5B.hidden
    hbm = GPUS["B200"].hbm_gbytes * 1e9
    # Then each of the 7 + 9 tensors costs the amax read, the cast read and one FP8 write: 5 bytes
    assert _cast_s_per_block(GPT5B, "p6-b200.48xlarge", plan) == pytest.approx(
        5.0 * (2 + 5 / 2 + 2 + 7 / 2) * sbh / hbm, rel=1e-9
    )


def test_bf16_plans_do_not_depend_on_any_fp8_constant() -> None:
    # Given FP8 constants set to absurd values
    odd = dataclasses.replace(DEFAULT_EFFICIENCY, gemm_fp8=0.01, fp8_cast_bytes=1e6, fp8_transpose_bytes=1e6)
    for model in (GPT5B, dataclasses.replace(GPT5B, recompute=Recompute.FULL, sequence_parallel=True)):
        for plan in (PLAN, Plan(2, 2, 16, 2), Plan(8, 1, 8, 1)):
            # Then a bf16 evaluation is bit-for-bit the same
            assert evaluate(model, H100, plan, efficiency=odd) == evaluate(model, H100, plan)
    # While FP8 does depend on them
    assert (
        evaluate(_fp8(GPT5B), H100, PLAN, efficiency=odd).step_time_s
        > 10 * evaluate(_fp8(GPT5B), H100, PLAN).step_time_s
    )


def test_the_calibrated_compute_factor_scales_the_fp8_gemms_and_casts() -> None:
    # Given an FP8 job on a GPU 20% slower than the model's constants (every compute-side term)
    base = dataclasses.replace(DEFAULT_EFFICIENCY, loss_bytes_per_logit=0.0)
    slow = apply_factors(base, {"compute": 0.8})
    # Then its compute time is 1/0.8 of the nominal: the FP8 GEMMs and the casts slow down with the rest
    nominal = evaluate(_fp8(GPT5B), H100, PLAN, efficiency=base)
    fitted = evaluate(_fp8(GPT5B), H100, PLAN, efficiency=slow)
    assert fitted.compute_s == pytest.approx(nominal.compute_s / 0.8, rel=1e-9)
