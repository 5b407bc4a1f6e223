"""The transformer being trained: shape, batch, precision, recompute and optimizer sharding, and the
closed-form counts the cost model needs (parameters, FLOPs, activation bytes).

Formulas follow Narayanan et al. (SC21) and Korthikanti et al. (2022); see docs/planner.md. Everything here
is per *whole model* or per *layer*; dividing work among GPUs is the cost model's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ModelSpec", "OptimizerSharding", "Precision", "Recompute"]


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
    """A decoder of ``layers`` blocks of attention and MLP, embedding of ``vocab`` x ``hidden``.

    GPT-style by default (4h MLP with GELU, every head its own keys and values, tied embedding). Llama-style
    models set ``ffn_hidden`` (e.g. 14336 for Llama 3 8B), ``kv_heads`` (grouped-query attention: 8) and
    ``gated_mlp`` (SwiGLU: the MLP's first GEMM produces a gate and an up projection, ``2 ffn`` wide)."""

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
    # The MLP's inner width (None: 4 x hidden, GPT's).
    ffn_hidden: int | None = None
    # Key/value heads (None: one per query head; fewer is grouped-query attention, and must divide heads).
    kv_heads: int | None = None
    # A gated MLP (SwiGLU, GeGLU): two input projections of ffn width, multiplied, then the output one.
    gated_mlp: bool = False

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "seq", "vocab", "global_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("ffn_hidden", "kv_heads"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive integer (or unset), got {value!r}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.kv_heads is not None and (self.kv_heads > self.heads or self.heads % self.kv_heads):
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")

    # -- shape ----------------------------------------------------------------------------------------------

    @property
    def ffn(self) -> int:
        """The MLP's inner width."""
        return 4 * self.hidden if self.ffn_hidden is None else self.ffn_hidden

    @property
    def kv_head_count(self) -> int:
        """Key/value heads: ``kv_heads``, or one per query head."""
        return self.heads if self.kv_heads is None else self.kv_heads

    def splits_heads(self, tp: int) -> bool:
        """Whether tensor parallelism ``tp`` divides the query heads and the key/value heads (Megatron-Core
        asserts both: each rank holds whole query groups)."""
        return self.heads % tp == 0 and self.kv_head_count % tp == 0

    @property
    def kv_hidden(self) -> int:
        """Width of the keys (and of the values): kv_heads x head size."""
        return self.kv_head_count * (self.hidden // self.heads)

    @property
    def qkv_width(self) -> int:
        """Output width of the QKV projection."""
        return self.hidden + 2 * self.kv_hidden

    @property
    def fc1_width(self) -> int:
        """Output width of the MLP's first projection (gate and up together when gated)."""
        return self.ffn * (2 if self.gated_mlp else 1)

    @property
    def gemm_weights(self) -> float:
        """Weights of a block's dense GEMMs (QKV, projection, FC1, FC2): 12 h^2 for GPT."""
        h = self.hidden
        return float(h * self.qkv_width + h * h + h * self.fc1_width + self.ffn * h)

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
        """Weights of one block: the dense GEMMs (12 h^2 for GPT), their biases and two layer norms (13 h for
        GPT; Llama has no biases and one weight per norm: about 0.02% of its parameters)."""
        return self.gemm_weights + self.qkv_width + self.fc1_width + 6.0 * self.hidden

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
        """Forward dense matmuls of one block for one sample: 2 s x the GEMM weights (24 s h^2 for GPT)."""
        return 2.0 * self.seq * self.gemm_weights

    def layer_attention_flops(self) -> float:
        """Forward QK^T and attention-times-V of one block for one sample: 4 s^2 h."""
        return 4.0 * self.seq * self.seq * self.hidden

    def logits_flops(self) -> float:
        """Forward output projection onto the vocabulary for one sample: 2 s h V."""
        return 2.0 * self.seq * self.hidden * self.vocab

    def model_flops_per_iteration(self) -> float:
        """Forward + backward, no recomputation (MFU's numerator): for GPT 72 B s l h^2 (1 + s/(6h) +
        V/(12 h l))."""
        per_sample = (
            self.layers * (self.layer_gemm_flops() + self.layer_attention_flops()) + self.logits_flops()
        )
        return 3.0 * self.global_batch * per_sample

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
        return core / (_REPLICATED + self._split_terms() + core)

    def _split_terms(self) -> float:
        """Activations of a block split by tensor parallelism, per s*b*h (Korthikanti's 24 for GPT): Q (2),
        K and V (2 each, narrower under grouped-query attention), the projection's input (2), and the MLP's
        inner tensors (GELU's input and output, 4 ffn/h; gated: gate, up and their product, 6 ffn/h)."""
        h = float(self.hidden)
        attention = 4.0 + 4.0 * self.kv_hidden / h
        mlp = (6.0 if self.gated_mlp else 4.0) * self.ffn / h
        return attention + mlp

    # -- activations (bytes per layer, per micro-batch of ``b`` samples) ---------------------------------

    def _block_terms(self, tp: int) -> float:
        """All activations of one block per s*b*h: 10 (replicated; sharded under sequence parallelism)
        + 24/t + 5as/(ht) (the attention scores and dropout mask, never stored by a fused kernel)."""
        core = 0.0 if self.flash_attention else 5.0 * self.heads * self.seq / (self.hidden * tp)
        return self._kept_terms(tp) + core

    def _kept_terms(self, tp: int) -> float:
        """A block's activations per s*b*h outside the attention core, on one GPU: the replicated ones
        (sharded under sequence parallelism) and the tp-split ones."""
        replicated = _REPLICATED / tp if self.sp else _REPLICATED
        return replicated + self._split_terms() / tp

    def layer_activation_bytes(self, micro_batch: int, tp: int) -> float:
        """Bytes a block keeps for its backward pass under this recompute mode (Korthikanti eqs. 2-6)."""
        sbh = float(self.seq * micro_batch * self.hidden)
        if self.recompute is Recompute.FULL:
            # Only the block's input, itself sharded under sequence parallelism.
            return 2.0 * sbh / (tp if self.sp else 1)
        if self.recompute is Recompute.SELECTIVE:
            return sbh * self._kept_terms(tp)
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


# Activations of a block per s*b*h that tensor parallelism replicates (sequence parallelism shards them):
# the two layer norms' inputs (4), the QKV and FC1 inputs (4) and the two dropout masks (2) (Korthikanti).
_REPLICATED = 10.0


@dataclass(frozen=True, slots=True)
class _Passes:
    gemm: float
    attention: float
    elementwise: float
    tp_collectives: int
