"""Given a Llama-style model (grouped-query attention, a gated MLP of its own width, untied embeddings), when the
planner counts and scores it, then its parameters are the published ones, its FLOPs follow its shape rather
than GPT's 12 h^2, GPT models are counted exactly as before, and `osprey plan` takes the shape as flags."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.planner import ModelSpec, Plan, PlanError, Recompute, cluster, evaluate
from osprey_control.planner.config import resolve
from osprey_control.planner.gemm import depth_factor, fp8_cast_bytes
from osprey_control.planner.model import Precision
from osprey_control.planner.plan import check_plan
from osprey_control.planner.search import search

# Meta's published shapes (model cards / params.json): layers, hidden, heads, kv heads, MLP width, vocabulary.
LLAMA3_8B = ModelSpec(
    layers=32, hidden=4096, heads=32, seq=8192, vocab=128256, global_batch=128,
    kv_heads=8, ffn_hidden=14336, gated_mlp=True, tied_embeddings=False, flash_attention=True,
)  # fmt: skip
LLAMA3_70B = ModelSpec(
    layers=80, hidden=8192, heads=64, seq=8192, vocab=128256, global_batch=128,
    kv_heads=8, ffn_hidden=28672, gated_mlp=True, tied_embeddings=False, flash_attention=True,
)  # fmt: skip
LLAMA2_7B = ModelSpec(
    layers=32, hidden=4096, heads=32, seq=4096, vocab=32000, global_batch=128,
    ffn_hidden=11008, gated_mlp=True, tied_embeddings=False, flash_attention=True,
)  # fmt: skip


@pytest.mark.parametrize(
    ("model", "published"),
    # Exact counts of the released checkpoints (sums of their tensor sizes)
    [(LLAMA3_8B, 8_030_261_248), (LLAMA3_70B, 70_553_706_496), (LLAMA2_7B, 6_738_415_616)],
    ids=["llama3-8b", "llama3-70b", "llama2-7b"],
)
def test_parameters_are_the_published_counts(model: ModelSpec, published: float) -> None:
    # The model counts GPT's biases and two-weight norms, which Llama does not have: about 0.02% more
    assert published < model.params < published * 1.0003


def test_a_gpt_model_is_counted_as_before() -> None:
    # Given GPT's shape (the defaults), then its block is 12 h^2 + 13 h and its GEMMs 24 s h^2 a sample
    gpt = ModelSpec(layers=24, hidden=2048, heads=16, seq=2048, vocab=51200, global_batch=512)
    h, s = 2048, 2048
    assert gpt.layer_params == 12 * h * h + 13 * h
    assert gpt.layer_gemm_flops() == 24 * s * h * h
    assert gpt.model_flops_per_iteration() == pytest.approx(
        72 * 512 * s * 24 * h * h * (1 + s / (6 * h) + 51200 / (12 * h * 24))
    )
    # And its activations are Korthikanti's s b h (10 + 24/t + 5 a s/(h t)) (no fused attention, no recompute)
    a, b, t = 16, 2, 4
    plain = dataclasses.replace(gpt, recompute=Recompute.NONE)
    assert plain.layer_activation_bytes(b, t) == pytest.approx(
        s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    )
    assert dataclasses.replace(
        gpt, recompute=Recompute.SELECTIVE, sequence_parallel=False
    ).layer_activation_bytes(b, t) == pytest.approx(s * b * h * (10 + 24 / t))
    # And each GEMM's depth is GPT's (QKV 3h^2 at K = h, projection h^2 at h/t, FC1 4h^2 at h, FC2 4h^2 at 4h/t;
    # backward K = 3h/t, h, 4h/t, h), and the FP8 casts are 5 and 7 s b h per forward and backward over t
    k0 = 300.0

    def stretch(pairs: list[tuple[float, float]]) -> float:
        return sum(share * (1 + k0 / depth) for share, depth in pairs)

    forward = stretch([(0.25, h), (1 / 12, h / t), (1 / 3, h), (1 / 3, 4 * h / t)])
    backward = stretch([(0.25, 3 * h / t), (1 / 12, h), (1 / 3, 4 * h / t), (1 / 3, h)])
    weight = 1 + k0 / (s * b)
    assert depth_factor(gpt, b, t, 3.0, k0) == pytest.approx((forward + backward + weight) / 3)
    fp8 = dataclasses.replace(gpt, recompute=Recompute.NONE, sequence_parallel=False, precision=Precision.FP8)
    assert fp8_cast_bytes(fp8, b, t, 1.0, 5.0) == pytest.approx(s * b * h * ((5 + 7) / t + 4) * 6.0)
    # And spelling GPT's defaults out changes nothing
    explicit = ModelSpec(
        layers=24,
        hidden=2048,
        heads=16,
        seq=2048,
        vocab=51200,
        global_batch=512,
        ffn_hidden=8192,
        kv_heads=16,
    )
    assert explicit.params == gpt.params
    assert explicit.layer_activation_bytes(2, 4) == gpt.layer_activation_bytes(2, 4)


def test_flops_follow_the_shape_and_match_nemos_count_with_causal_attention() -> None:
    # NeMo's "Model TFLOP/s" for Llama 3 8B on H100 (744 at 14451 tokens/s/GPU) is 51.5 GFLOP a token; ours
    # counts the attention scores over the whole s x s square (as SC21's formula does), NeMo the causal half
    per_token = LLAMA3_8B.model_flops_per_iteration() / (LLAMA3_8B.global_batch * LLAMA3_8B.seq)
    causal_half = 3.0 * LLAMA3_8B.layers * LLAMA3_8B.layer_attention_flops() / 2 / LLAMA3_8B.seq
    assert per_token - causal_half == pytest.approx(744e12 / 14451, rel=0.01)


def test_grouped_query_attention_and_a_gated_mlp_change_what_a_block_keeps() -> None:
    # Given the same block with every head its own keys and values, and with 8 KV heads
    mha = ModelSpec(layers=32, hidden=4096, heads=32, seq=8192, vocab=128256, global_batch=128,
                    ffn_hidden=14336, gated_mlp=True, recompute=Recompute.SELECTIVE)  # fmt: skip
    gqa = ModelSpec(layers=32, hidden=4096, heads=32, seq=8192, vocab=128256, global_batch=128,
                    ffn_hidden=14336, gated_mlp=True, kv_heads=8, recompute=Recompute.SELECTIVE)  # fmt: skip
    # Then GQA keeps smaller K and V (4 x (1 - 1/4) s b h less, split over tp) and has fewer weights
    sbh = 8192 * 1 * 4096
    assert mha.layer_activation_bytes(1, 1) - gqa.layer_activation_bytes(1, 1) == pytest.approx(3.0 * sbh)
    assert mha.layer_params - gqa.layer_params == pytest.approx(2 * 4096 * (4096 - 1024) + 2 * (4096 - 1024))


def test_the_shape_changes_the_predicted_step() -> None:
    # Given Llama 3 8B on one p5 node, and the same model described as GPT (4h MLP, no GQA)
    nodes = cluster(8, instance_type="p5.48xlarge")
    plan = Plan(tp=1, pp=1, dp=8, micro_batch=1)
    as_gpt = ModelSpec(layers=32, hidden=4096, heads=32, seq=8192, vocab=128256, global_batch=128,
                       tied_embeddings=False, flash_attention=True)  # fmt: skip
    llama = evaluate(LLAMA3_8B, nodes, plan)
    gpt = evaluate(as_gpt, nodes, plan)
    # Then the Llama block (3 x 14336-wide MLP GEMMs, narrow K/V) costs more than GPT's 12 h^2 block
    assert llama.step_time_s > gpt.step_time_s * 1.05


runner = CliRunner()
LLAMA_FLAGS = [
    "--layers", "32", "--hidden", "4096", "--heads", "32", "--seq", "8192", "--vocab", "128256",
    "--global-batch", "128", "--ffn-hidden", "14336", "--kv-heads", "8", "--gated-mlp", "on",
    "--tied-embeddings", "off", "--gpus", "8", "--instance-type", "p5.48xlarge",
]  # fmt: skip


def test_osprey_plan_takes_the_llama_shape() -> None:
    # When the user plans Llama 3 8B with its shape flags, and the same model without them (GPT's shape)
    evaluate_flags = ["--json", "--evaluate", "tp=1,pp=1,micro_batch=1", "--recompute", "none"]
    llama = runner.invoke(app, ["plan", *LLAMA_FLAGS, *evaluate_flags])
    assert llama.exit_code == 0, llama.output
    gpt_flags = (
        LLAMA_FLAGS[: LLAMA_FLAGS.index("--ffn-hidden")]
        + LLAMA_FLAGS[LLAMA_FLAGS.index("--tied-embeddings") :]
    )
    gpt = runner.invoke(app, ["plan", *gpt_flags, *evaluate_flags])
    # Then the evaluated plan is scored as the planner scores the Llama model, not as GPT
    scored: dict[str, Any] = json.loads(llama.stdout)["plan"]
    model = resolve({**_config(), "recompute": "none"}).model
    expected = evaluate(model, cluster(8, instance_type="p5.48xlarge"), Plan(1, 1, 8, 1))
    assert scored["step_time_s"] == pytest.approx(expected.step_time_s)
    assert scored["step_time_s"] > json.loads(gpt.stdout)["plan"]["step_time_s"]
    # And the table's header names the shape
    table = runner.invoke(app, ["plan", *LLAMA_FLAGS, "--top", "1"])
    assert "32 heads (8 KV), gated MLP 14336" in table.output


def _config() -> dict[str, Any]:
    return {
        "layers": 32, "hidden": 4096, "heads": 32, "seq": 8192, "vocab": 128256, "global-batch": 128,
        "ffn-hidden": 14336, "kv-heads": 8, "gated-mlp": "on", "tied-embeddings": "off", "gpus": 8,
        "instance-type": "p5.48xlarge",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--kv-heads", "5", "kv-heads: must divide heads (32), got 5"), ("--ffn-hidden", "0", "ffn-hidden"),
     ("--gated-mlp", "maybe", "gated-mlp")],
)  # fmt: skip
def test_a_bad_shape_flag_exits_2_naming_it(flag: str, value: str, message: str) -> None:
    flags = list(LLAMA_FLAGS)
    if flag in flags:
        flags[flags.index(flag) + 1] = value
    else:
        flags += [flag, value]
    result = runner.invoke(app, ["plan", *flags])
    assert result.exit_code == 2  # a bad flag value: a usage error (docs/cli.md)
    assert message in result.output


def test_tp_must_divide_the_key_value_heads_too() -> None:
    # Given Llama 3 70B (64 heads, 8 KV heads) and a model with only 2 KV heads
    two_kv = dataclasses.replace(LLAMA3_70B, kv_heads=2)
    nodes = cluster(64, instance_type="p5.48xlarge")
    # Then tp=4 is refused for the 2-KV-head model, naming both head counts (Megatron-Core asserts it)
    with pytest.raises(PlanError, match="64 attention heads and the 2 key/value heads"):
        check_plan(two_kv, nodes, Plan(tp=4, pp=8, dp=2, micro_batch=1))
    check_plan(LLAMA3_70B, nodes, Plan(tp=8, pp=8, dp=1, micro_batch=1))
    # And the search never proposes such a tp
    result = search(two_kv, nodes)
    assert result.best is not None
    assert {e.plan.tp for e in result.candidates} <= {1, 2}
