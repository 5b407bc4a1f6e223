"""The transformer being trained: shape, batch, precision, recompute and optimizer sharding, and the
closed-form counts the cost model needs (parameters, FLOPs, activation bytes).

Formulas follow Narayanan et al. (SC21) and Korthikanti et al. (2022); see docs/planner.md. Everything here
is per *whole model* or per *layer*; dividing work among GPUs is the cost model's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "BYTES_PER_ELEMENT",
    "ModelSpec",
    "OptimizerSharding",
    "Precision",
    "Recompute",
]


class Recompute(StrEnum):
    """Activation recomputation. ``selective`` recomputes the attention core only; unless sequence parallelism
    is set explicitly it implies it (Korthikanti's recommended pair)."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class OptimizerSharding(StrEnum):
    NONE = "none"
    ZERO1 = "zero1"


class Precision(StrEnum):
    """Arithmetic of the matrix multiplies. Activations and weights are stored in 16 bits in every case."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"


# Activations, weights and gradients on the wire are 16-bit in all supported precisions (FP8 training keeps
# its activations in bf16 outside the GEMMs), which is also what the Korthikanti activation formulas assume.
BYTES_PER_ELEMENT = 2


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A GPT-style decoder: ``layers`` blocks of attention + 4h MLP, tied embedding of ``vocab`` x ``hidden``."""

    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    global_batch: int
    precision: Precision = Precision.BF16
    recompute: Recompute = Recompute.FULL
    optimizer_sharding: OptimizerSharding = OptimizerSharding.NONE
    # Megatron's default: gradients accumulate and are all-reduced in fp32 (18 bytes of model state per
    # parameter instead of 16).
    fp32_grad_accumulation: bool = True
    # None: on with selective recompute, off otherwise (the pairing of Korthikanti et al.).
    sequence_parallel: bool | None = None
    # A fused attention kernel (FlashAttention, cuDNN): the s x s scores are never stored or written to HBM.
    # Off for the 2021-22 papers' runs, on for anything trained since (Megatron-Core, NeMo, torch SDPA).
    flash_attention: bool = False
    # GPT-2/3 tie the output projection to the input embedding; Llama-style models and Megatron-Core's
    # default (--untie-embeddings-and-output-weights) keep two vocab x hidden matrices.
    tied_embeddings: bool = True
    # Megatron-Core's communication overlap: tensor-parallel all-gather/reduce-scatter pipelined with the
    # GEMMs (--tp-comm-overlap, needs sequence parallelism) and the gradient reduce-scatter / parameter
    # all-gather of the distributed optimizer bucketed behind the backward and forward passes.
    comm_overlap: bool = False

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "seq", "vocab", "global_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")

    @property
    def sp(self) -> bool:
        """Sequence parallelism in effect (explicit, or implied by selective recompute)."""
        if self.sequence_parallel is None:
            return self.recompute is Recompute.SELECTIVE
        return self.sequence_parallel

    @property
    def distributed_optimizer(self) -> bool:
        return self.optimizer_sharding is OptimizerSharding.ZERO1

    # -- parameters ---------------------------------------------------------------------------------------

    @property
    def layer_params(self) -> float:
        """Weights of one block: QKV + projection (4h^2), MLP (8h^2), biases and two layer norms (13h)."""
        h = self.hidden
        return 12.0 * h * h + 13.0 * h

    @property
    def embedding_params(self) -> float:
        """The input embedding (which the tied output projection shares)."""
        return float(self.vocab * self.hidden)

    @property
    def output_params(self) -> float:
        """A separate output projection (untied embeddings), held by the last stage."""
        return 0.0 if self.tied_embeddings else float(self.vocab * self.hidden)

    @property
    def params(self) -> float:
        return self.layers * self.layer_params + self.embedding_params + self.output_params

    @property
    def grad_bytes(self) -> int:
        return 4 if self.fp32_grad_accumulation else 2

    def model_state_bytes_per_param(self, dp: int) -> float:
        """16-bit weights + gradients + fp32 master, momentum and variance (12 B, divided by dp under ZeRO-1)."""
        optimizer = 12.0 / dp if self.optimizer_sharding is OptimizerSharding.ZERO1 else 12.0
        return BYTES_PER_ELEMENT + self.grad_bytes + optimizer

    # -- FLOPs (per sample of ``seq`` tokens) --------------------------------------------------------------

    def layer_gemm_flops(self) -> float:
        """Forward dense matmuls of one block for one sample: 24 s h^2."""
        return 24.0 * self.seq * self.hidden * self.hidden

    def layer_attention_flops(self) -> float:
        """Forward QK^T and attention-times-V of one block for one sample: 4 s^2 h."""
        return 4.0 * self.seq * self.seq * self.hidden

    def logits_flops(self) -> float:
        """Forward output projection onto the vocabulary for one sample: 2 s h V."""
        return 2.0 * self.seq * self.hidden * self.vocab

    def model_flops_per_iteration(self) -> float:
        """72 B s l h^2 (1 + s/(6h) + V/(12 h l)): forward + backward, no recomputation (MFU's numerator)."""
        b, s, n, h, v = self.global_batch, self.seq, self.layers, self.hidden, self.vocab
        return 72.0 * b * s * n * h * h * (1 + s / (6 * h) + v / (12 * h * n))

    def hardware_flops_per_iteration(self) -> float:
        """FLOPs executed including recomputation; with ``full`` this is SC21's
        96 B s l h^2 (1 + s/(6h) + V/(16 l h)), the figure Table 1's TFLOP/s are computed from."""
        passes = self.layer_passes()
        per_sample = self.layers * (
            passes.gemm * self.layer_gemm_flops() + passes.attention * self.layer_attention_flops()
        )
        return self.global_batch * (per_sample + 3.0 * self.logits_flops())

    def layer_passes(self) -> _Passes:
        """Forward-equivalents executed per block: forward 1 + backward 2, plus what is recomputed."""
        if self.recompute is Recompute.FULL:
            return _Passes(gemm=4.0, attention=4.0, elementwise=4.0, tp_collectives=6)
        if self.recompute is Recompute.SELECTIVE:
            # Only the attention core (QK^T, softmax, dropout, attention x V) runs again.
            return _Passes(gemm=3.0, attention=4.0, elementwise=3.0 + self._core_share(), tp_collectives=4)
        return _Passes(gemm=3.0, attention=3.0, elementwise=3.0, tp_collectives=4)

    def _core_share(self) -> float:
        """Share of a block's elementwise traffic that belongs to the attention core (5as/h of 34+5as/h)."""
        if self.flash_attention:
            return 0.0
        core = 5.0 * self.heads * self.seq / self.hidden
        return core / (34.0 + core)

    # -- activations (bytes per layer, per micro-batch of ``b`` samples) ---------------------------------

    def _block_terms(self, tp: int) -> float:
        """All activations of one block per s*b*h: 10 (replicated; sharded under sequence parallelism)
        + 24/t + 5as/(ht) (the attention scores and dropout mask, never stored by a fused kernel)."""
        replicated = 10.0 / tp if self.sp else 10.0
        core = 0.0 if self.flash_attention else 5.0 * self.heads * self.seq / (self.hidden * tp)
        return replicated + 24.0 / tp + core

    def layer_activation_bytes(self, micro_batch: int, tp: int) -> float:
        """Bytes a block keeps for its backward pass under this recompute mode (Korthikanti eqs. 2-6)."""
        sbh = float(self.seq * micro_batch * self.hidden)
        if self.recompute is Recompute.FULL:
            # Only the block's input, itself sharded under sequence parallelism.
            return 2.0 * sbh / (tp if self.sp else 1)
        if self.recompute is Recompute.SELECTIVE:
            replicated = 10.0 / tp if self.sp else 10.0
            return sbh * (replicated + 24.0 / tp)
        return self.layer_working_bytes(micro_batch, tp)

    def layer_working_bytes(self, micro_batch: int, tp: int) -> float:
        """All activations of one block: s b h (10 + 24/t + 5 a s/(h t)) with tensor parallelism only.
        Under full recompute one block's worth is rebuilt at a time during the backward pass."""
        return float(self.seq * micro_batch * self.hidden) * self._block_terms(tp)

    def elementwise_bytes(self, micro_batch: int, tp: int) -> float:
        """Bytes of the tensors one block's forward reads and writes outside the GEMMs: the no-recompute
        activation footprint, with the 10 s b h replicated part sharded when sequence parallelism is on."""
        return self.layer_working_bytes(micro_batch, tp)

    def boundary_bytes(self, micro_batch: int) -> float:
        """One stage's output for one micro-batch (s b h 16-bit values), sent to the next stage."""
        return float(self.seq * micro_batch * self.hidden * BYTES_PER_ELEMENT)

    def stage_layers(self, pp: int) -> int:
        """Blocks on the busiest stage: an uneven split puts ceil(l/p) on the first stages."""
        return math.ceil(self.layers / pp)


@dataclass(frozen=True, slots=True)
class _Passes:
    gemm: float
    attention: float
    elementwise: float
    tp_collectives: int
