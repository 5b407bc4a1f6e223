"""Given published H100 results (Megatron-LM's weak-scaling table) and NeMo's FP8 GPT-3 runs on H100 and
B200, when the planner predicts them with its global constants and the GPU's datasheet figures, then it
meets issue #18's goals on the H100 table: within 20% on at least 7 of 9 rows, and the published layout
within 10% of the planner's best on at least 6 of 9. (The constants were not fitted to these rows; see
docs/planner.md for how the H100 GEMM efficiency was set and for the errors, which are reported, not hidden.)
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.planner.cross_generation import h100_rows, llama_rows, model_tflops, nemo_rows, predict

H100 = h100_rows()


@pytest.fixture(scope="module")
def h100_predictions() -> list[tuple[float, float, float]]:
    """(published, predicted, planner's best) model TFLOP/s per GPU for each row."""
    found = []
    for row in H100:
        published, best = predict(row)
        found.append((row.tflops_per_gpu, model_tflops(row, published), model_tflops(row, best)))
    return found


def test_the_h100_table_has_nine_rows_from_48_to_6144_gpus() -> None:
    assert len(H100) == 9
    assert (H100[0].cluster.gpus, H100[-1].cluster.gpus) == (48, 6144)
    assert all(row.cluster.gpu.name == "H100" for row in H100)


def test_h100_predicted_throughput_within_20_percent_on_7_of_9(
    h100_predictions: list[tuple[float, float, float]],
) -> None:
    within = [abs(predicted / published - 1.0) <= 0.20 for published, predicted, _ in h100_predictions]
    assert sum(within) >= 7, within


def test_h100_published_layout_within_10_percent_of_the_best_on_6_of_9(
    h100_predictions: list[tuple[float, float, float]],
) -> None:
    agreeing = [predicted >= 0.9 * best for _, predicted, best in h100_predictions]
    assert sum(agreeing) >= 6, agreeing


def test_the_a100_era_model_would_fail_the_h100_goal() -> None:
    # Given the same rows modelled as the planner did before issue #18 (no fused attention, no overlap)
    old = [
        dataclasses.replace(
            row, model=dataclasses.replace(row.model, flash_attention=False, comm_overlap=False)
        )
        for row in H100
    ]
    within = 0
    for row, original in zip(old, H100, strict=True):
        published, _ = predict(row)
        within += abs(model_tflops(row, published) / original.tflops_per_gpu - 1.0) <= 0.20
    # Then it misses the goal: the validation can fail
    assert within < 7


def test_every_nemo_row_is_predicted_and_the_b200_row_within_20_percent() -> None:
    rows = nemo_rows()
    assert {row.cluster.gpu.name for row in rows} == {"H100", "B200"}
    b200 = next(row for row in rows if row.cluster.gpu.name == "B200")
    published, _ = predict(b200)
    assert abs(model_tflops(b200, published) / b200.tflops_per_gpu - 1.0) <= 0.20


def test_llama_rows_are_predicted_from_their_shape_within_20_percent_on_4_of_5() -> None:
    # Given NVIDIA's Llama FP8 runs (grouped-query attention, SwiGLU), on H100 and B200
    rows = llama_rows()
    assert {row.cluster.gpu.name for row in rows} == {"H100", "B200"}
    assert {row.model.kv_heads for row in rows} == {8, 32, 40}
    errors = []
    for row in rows:
        published, _ = predict(row)
        errors.append(model_tflops(row, published) / row.tflops_per_gpu - 1.0)
    # Then four of five are within 20% (Llama 3 70B, forced into full recompute by the memory model, is not)
    assert sum(abs(error) <= 0.20 for error in errors) >= 4, errors
