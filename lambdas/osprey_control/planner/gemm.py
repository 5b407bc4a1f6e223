"""The dense GEMMs of one transformer block as the cost model times them: the depth (reduction length K) of
each, which sets how much of a tile's time is its fixed prologue and epilogue, and the FP8 casts Transformer
Engine makes of their inputs. Pure arithmetic over :class:`~osprey_control.planner.model.ModelSpec`.

Depth: a GEMM tile streams K in steps; loading the first operands and writing the output tile cost the same
whatever K is, so a shallow GEMM runs below the large-GEMM rate. Measured on Hopper (tile-lang's FP16
benchmarks on an H800 SXM, M = N = 8192: 766, 736 and 628 TFLOP/s at K = 16384, 4096 and 1024) the rate
follows ``K / (K + k0)`` with ``k0`` about 243 at 989 TFLOP/s; ``k0`` grows with the GPU's tensor-core rate
(the fixed latency is a larger share of a faster K step), as the half-area of wave quantisation does.

Per block, the weights of the forward GEMMs (per sample and token; 12 h^2 for GPT) are QKV (h x the QKV
width, 3 h for GPT, narrower under grouped-query attention; K = h), the attention projection (h^2, K = h / t),
FC1 (h x its width: 4 h for GPT, 2 ffn when gated; K = h) and FC2 (ffn x h, K = ffn / t); the backward pass
runs each once for the input gradient (K = the forward output width: QKV / t, h, FC1 / t, h) and once for the
weight gradient (K = the micro-batch's tokens, s b).
"""

from __future__ import annotations

from osprey_control.planner.model import ModelSpec

__all__: list[str] = []


def _stretch(shares_and_depths: tuple[tuple[float, float], ...], half_depth: float) -> float:
    """Time of these GEMMs relative to the large-K rate, weighted by their share of the FLOPs."""
    return sum(share * (1.0 + half_depth / depth) for share, depth in shares_and_depths)


def depth_factor(model: ModelSpec, micro_batch: int, tp: int, gemm_passes: float, half_depth: float) -> float:
    """Multiplier on the block's GEMM time at the large-K rate, over ``gemm_passes`` forward-equivalents
    (forward 1, backward 2, recomputed forward 1 more)."""
    if half_depth <= 0:
        return 1.0
    h, weights = float(model.hidden), model.gemm_weights
    qkv, projection = h * model.qkv_width / weights, h * h / weights
    fc1, fc2 = h * model.fc1_width / weights, model.ffn * h / weights
    forward = _stretch(((qkv, h), (projection, h / tp), (fc1, h), (fc2, model.ffn / tp)), half_depth)
    input_grad = _stretch(
        ((qkv, model.qkv_width / tp), (projection, h), (fc1, model.fc1_width / tp), (fc2, h)), half_depth
    )
    weight_grad = 1.0 + half_depth / (model.seq * micro_batch)
    forwards = gemm_passes - 2.0
    return (forwards * forward + input_grad + weight_grad) / gemm_passes


def fp8_cast_bytes(model: ModelSpec, micro_batch: int, tp: int, transpose: float, cast: float) -> float:
    """HBM bytes of Transformer Engine's FP8 casts per block and micro-batch on one GPU: per forward, the 4
    GEMM inputs; backward, the 4 output gradients. QKV/FC1 inputs and projection/FC2 output gradients are
    s b h on every GPU unless sequence-parallel; attention output (h), FC2 input (ffn), QKV and FC1 output
    gradients (their widths) / tp."""
    h = float(model.hidden)
    sbh = float(model.seq * micro_batch * model.hidden)
    forwards = model.layer_passes().gemm - 2.0
    sharded = ((h + model.ffn) / h * forwards + (model.qkv_width + model.fc1_width) / h) / tp
    replicated = 2.0 * forwards + 2.0
    fused = cast + transpose
    # Sequence parallel: TE casts the local shard, all-gathers the FP8 copy and transposes it there (Hopper).
    gathered = cast / tp + 2.0 * transpose if model.sp else fused
    return sbh * (sharded * fused + replicated * gathered)
