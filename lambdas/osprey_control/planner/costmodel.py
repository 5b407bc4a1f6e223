"""Step time and memory of one parallel plan: the cost model.

A step is ``m`` micro-batches through a ``pp``-stage pipeline (1F1B, or interleaved with ``virtual`` chunks
per stage), each stage a ``tp``-way tensor-parallel group, replicated ``dp`` times; then the data-parallel
gradient all-reduce and the optimizer update. Ranks are laid out as Megatron does: tp innermost (inside a
node), then dp, then pp.

The efficiency model is a handful of global constants (``Efficiency``), calibrated once against the
published Megatron figures and documented in docs/planner.md; no row of any table is fitted on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from osprey_control.planner.gemm import depth_factor, fp8_cast_bytes
from osprey_control.planner.hardware import Cluster
from osprey_control.planner.model import ModelSpec, OptimizerSharding, Precision, Recompute
from osprey_control.planner.placement import Placement, place, rank_order
from osprey_control.planner.plan import Evaluation, Plan, PlanError, check_plan

__all__ = [
    "DEFAULT_EFFICIENCY",
    "Efficiency",
    "evaluate",
    "stage_speeds",
]

GIB = float(1 << 30)


@dataclass(frozen=True, slots=True)
class Efficiency:
    """The global constants of the efficiency model.

    - ``gemm``: fraction of peak a large 16-bit GEMM reaches; ``gemm_half_area``: the output size of one
      per-GPU GEMM (micro-batch tokens x hidden / tp) at which that fraction halves, so a micro-batch of
      one or a narrow tensor-parallel shard runs less efficiently (tiles left idle in the last wave).
    - ``attention``: fraction of peak of the s x s batched matmuls (QK^T, attention x V).
    - ``memory_touches``: HBM reads + writes per activation byte outside the GEMMs (layer norm, GeLU,
      softmax, dropout, residual adds), which run at memory bandwidth, not at peak FLOP/s.
    - ``layer_overhead_s``: fixed cost per block per pass (kernel launches, synchronisation).
    - ``nvlink`` / ``network``: fraction of the nominal link bandwidth a NCCL collective achieves.
    - ``bucket_bytes``: gradient bucket of the data-parallel all-reduce; each bucket pays ring latency.
    - ``dp_overlap``: fraction of the data-parallel all-reduce that may hide behind the last micro-batch's
      backward pass (only that pass produces final gradients).
    - ``optimizer_bytes_per_param``: HBM traffic of the Adam update per locally-updated parameter.
    - ``cross_node_tp_penalty``: multiplier on tensor-parallel collectives that leave the node, for the
      synchronous, latency-bound traffic that per-layer collectives are over a network.
    - ``gemm_reference_tflops``: the 16-bit peak ``gemm_half_area`` was set on (A100). A GPU with more
      tensor-core throughput needs proportionally more tiles in flight to fill its SMs, so the half-area
      scales with its peak (wave quantisation grows with SMs x tile size, which is what the peak grows with).
    - ``flash_attention``: fraction of the 16-bit peak a fused attention kernel reaches on the attention
      FLOPs as counted (4 s^2 h forward, no causal discount: a causal kernel skips half the tiles, so this is
      about twice the kernel's own utilisation).
    - ``gemm_scale``: multiplier on the GEMM efficiency in use (``gemm``, or the GPU's own
      ``gemm_efficiency``); 1 unless fitted to measured step times (``calibrate``).
    - ``loss_bytes_per_logit``: HBM traffic of the cross-entropy per logit (s x b x V / tp of them on the
      last stage): fp32 logits read and written by about four elementwise passes (cast, max, exp-sum,
      gradient), 4 passes x 2 touches x 4 bytes. Negligible at V/h ~ 4 (GPT-3), not at V = 131072, h = 2048.
    - ``tp_overlap``: share of the tensor-parallel communication hidden behind the GEMMs with
      ``comm_overlap`` (Megatron-Core's --tp-comm-overlap pipelines the all-gather/reduce-scatter chunks).
    - ``gemm_half_depth``: the reduction length K at which a GEMM runs at half the large-K rate, at the
      reference peak (scaled with the GPU's like ``gemm_half_area``): 77 = 243 x 312 / 989, 243 from
      tile-lang's H800 FP16 GEMMs (766, 736, 628 TFLOP/s at K = 16384, 4096, 1024). :mod:`.gemm`.
    - ``micro_batch_overhead_s``: fixed cost of the pipeline schedule per micro-batch and stage (forward and
      backward together): the runtime's own work between kernels (a schedule interpreted step by step,
      host synchronisation, send/receive set-up). 0 in the calibrated model: Megatron's schedules on SC21
      show none; a stack that pays it shows it in measured step times, and ``calibrate`` fits it there.
    - ``gemm_fp8``: fraction of the FP8 peak a large FP8 GEMM reaches (times ``gemm_scale``): 0.72, Hopper's
      16-bit fraction, since per-tensor scaled FP8 GEMMs measure 2.0x the 16-bit ones on an H800 at K >= 4096
      (tile-lang's benchmarks; cuBLAS 12.9's 1.75x is for channel/block scaling; docs/planner.md).
    - ``fp8_cast_bytes``: HBM bytes per element Transformer Engine casts to FP8 (current scaling: amax read
      2, cast read 2, write 1); ``fp8_transpose_bytes``: the transposed copy Hopper's TN-only FP8 GEMMs need
      (written; also read after a sequence-parallel gather; none on Blackwell). What: :func:`.gemm.fp8_cast_bytes`.
    """

    gemm: float = 0.78
    gemm_half_area: float = 0.5e6
    attention: float = 0.39
    memory_touches: float = 2.0
    layer_overhead_s: float = 100e-6
    nvlink: float = 0.8
    network: float = 0.8
    bucket_bytes: float = 40e6 * 4
    dp_overlap: float = 0.5
    optimizer_bytes_per_param: float = 32.0
    cross_node_tp_penalty: float = 2.0
    gemm_reference_tflops: float = 312.0
    flash_attention: float = 0.7
    tp_overlap: float = 0.7
    gemm_scale: float = 1.0
    loss_bytes_per_logit: float = 32.0
    micro_batch_overhead_s: float = 0.0
    gemm_half_depth: float = 77.0
    gemm_fp8: float = 0.72
    fp8_cast_bytes: float = 5.0
    fp8_transpose_bytes: float = 1.0


DEFAULT_EFFICIENCY = Efficiency()


def stage_speeds(cluster: Cluster, pp: int) -> list[float]:
    """Speed of each stage under the planner's placement (:func:`placement.place`)."""
    return list(place(cluster, pp).speeds)


def _ring_allreduce(size: float, members: int, bandwidth: float, latency: float, chunks: float) -> float:
    """Ring all-reduce of ``size`` bytes: 2(n-1)/n of it crosses each link; each chunk pays 2(n-1) hops."""
    if members <= 1:
        return 0.0
    steps = 2.0 * (members - 1)
    return steps / members * size / bandwidth + steps * latency * chunks


def _peak_flops(model: ModelSpec, cluster: Cluster) -> float:
    """Peak of the dense GEMMs: FP8 where chosen (and the GPU has it), else the 16-bit peak."""
    gpu = cluster.gpu
    if model.precision is Precision.FP8:
        if gpu.peak_tflops_fp8 is None:
            raise PlanError(f"{gpu.name} has no FP8 tensor cores")
        return gpu.peak_tflops_fp8 * 1e12
    if model.precision is Precision.BF16 and not gpu.bf16:
        raise PlanError(f"{gpu.name} has no bf16 tensor cores; use precision fp16")
    return gpu.peak_tflops * 1e12


@dataclass(frozen=True, slots=True)
class _Links:
    """Effective rates (FLOP/s, bytes/s) and per-hop latencies (s) for one cluster under one efficiency model."""

    peak_flops: float
    peak16: float
    fp8_transpose: float | None  # bytes per element of the FP8 transposed copy; None: 16-bit training
    gemm: float | None
    attention_flops: float
    half_area: float
    hbm_bw: float
    nvlink_bw: float
    nvlink_lat: float
    net_bw_gpu: float
    net_lat: float
    per_node: int

    @classmethod
    def of(cls, model: ModelSpec, cluster: Cluster, eff: Efficiency) -> _Links:
        peak16 = cluster.gpu.peak_tflops * 1e12
        # FP8 training keeps attention in 16 bits (Transformer Engine's default recipe).
        attention = peak16 * (eff.flash_attention if model.flash_attention else eff.attention)
        return cls(
            peak_flops=_peak_flops(model, cluster),
            peak16=peak16,
            fp8_transpose=(eff.fp8_transpose_bytes if cluster.gpu.fp8_transposes else 0.0)
            if model.precision is Precision.FP8
            else None,
            gemm=cluster.gpu.gemm_efficiency,
            attention_flops=attention,
            half_area=eff.gemm_half_area * cluster.gpu.peak_tflops / eff.gemm_reference_tflops,
            hbm_bw=cluster.gpu.hbm_gbytes * 1e9,
            nvlink_bw=cluster.nvlink_bytes_per_s * eff.nvlink,
            nvlink_lat=cluster.nvlink_latency_us * 1e-6,
            # All GPUs of a node talk to the network at once, so each gets an equal share of its NICs.
            net_bw_gpu=cluster.network_bytes_per_s * eff.network / cluster.gpus_per_node,
            net_lat=cluster.network_latency_us * 1e-6,
            per_node=cluster.gpus_per_node,
        )


@dataclass(frozen=True, slots=True)
class _StageWork:
    """One micro-batch through one stage, on one GPU of nominal speed."""

    block_s: float
    compute_s: float
    logits_s: float
    tp_s: float
    pp_s: float


def _stage_work(model: ModelSpec, plan: Plan, links: _Links, eff: Efficiency) -> _StageWork:
    tp, pp, dp, b, v = plan.key()
    layers = model.stage_layers(pp)
    passes = model.layer_passes()
    peak, hbm = links.peak_flops, links.hbm_bw
    # Output elements of one per-GPU GEMM (tokens x sharded width): small ones leave SMs idle in the last
    # wave of tiles, which is what makes b=1 or a narrow tp shard slower per FLOP.
    area = b * model.seq * model.hidden / tp
    filled = area / (area + links.half_area)
    gemm_rate = gemm16_rate = links.peak16 * min(1.0, (links.gemm or eff.gemm) * eff.gemm_scale) * filled
    cast_s = 0.0
    if links.fp8_transpose is not None:
        # The block's GEMMs at their own FP8 efficiency, plus Transformer Engine's casts, at HBM speed.
        gemm_rate = peak * min(1.0, eff.gemm_fp8 * eff.gemm_scale) * filled
        cast_s = fp8_cast_bytes(model, b, tp, links.fp8_transpose, eff.fp8_cast_bytes) / hbm
    gemm_s = passes.gemm * model.layer_gemm_flops() * b / tp / gemm_rate
    # Shallow GEMMs (small K: h / tp, 4h / tp) pay their tiles' fixed cost; it grows with the tensor-core rate.
    half_depth = eff.gemm_half_depth * peak / 1e12 / eff.gemm_reference_tflops
    gemm_s *= depth_factor(model, b, tp, passes.gemm, half_depth)
    attention_s = passes.attention * model.layer_attention_flops() * b / tp / links.attention_flops
    elementwise_s = passes.elementwise * eff.memory_touches * model.elementwise_bytes(b, tp) / hbm
    block_s = gemm_s + attention_s + elementwise_s + cast_s + passes.elementwise * eff.layer_overhead_s
    # The output projection (never recomputed; 16-bit under FP8 too) sits on the last stage, the heaviest.
    logits_s = 3.0 * model.logits_flops() * b / tp / gemm16_rate
    # The loss over the vocabulary is memory-bound: fp32 logits cast, max, exp-sum and gradient passes.
    logits_s += eff.loss_bytes_per_logit * model.seq * b * model.vocab / tp / hbm

    # Tensor-parallel all-reduces of the s*b*h block output: 2 per pass forward and backward, 2 more when
    # the forward is recomputed. Across nodes only when allowed, at network speed and penalised.
    tp_size = model.boundary_bytes(b)
    if tp <= links.per_node:
        tp_one = _ring_allreduce(tp_size, tp, links.nvlink_bw, links.nvlink_lat, 1.0)
    else:
        tp_one = eff.cross_node_tp_penalty * _ring_allreduce(
            tp_size, tp, links.net_bw_gpu, links.net_lat, 1.0
        )

    # Pipeline sends: a micro-batch leaves every chunk once forward and once backward. Megatron's
    # scatter/gather sends 1/tp of the boundary per GPU when the next stage is on another node.
    pp_s = 0.0
    if pp > 1:
        if tp * dp >= links.per_node:
            send = links.net_lat + model.boundary_bytes(b) / tp / links.net_bw_gpu
        else:
            send = links.nvlink_lat + model.boundary_bytes(b) / links.nvlink_bw
        pp_s = 2.0 * v * send
    tp_s = layers * passes.tp_collectives * tp_one
    if model.comm_overlap and model.sp:
        tp_s *= 1.0 - eff.tp_overlap
    return _StageWork(
        block_s=block_s,
        compute_s=layers * block_s,
        logits_s=logits_s,
        tp_s=tp_s,
        pp_s=pp_s,
    )


def _dp_allreduce(grad_bytes: float, plan: Plan, links: _Links, eff: Efficiency) -> float:
    """Gradient all-reduce (or ZeRO-1 reduce-scatter + all-gather: the same bytes) over dp ranks, which
    sit per_node/tp to a node; every dp group of a node shares its NICs."""
    tp, dp = plan.tp, plan.dp
    chunks = max(1.0, math.ceil(grad_bytes / eff.bucket_bytes))
    on_node = min(dp, max(1, links.per_node // tp))
    inside = _ring_allreduce(grad_bytes, dp, links.nvlink_bw, links.nvlink_lat, chunks)
    if on_node >= dp:
        return inside
    groups_per_node = links.per_node / on_node
    node_bw = links.net_bw_gpu * links.per_node
    return max(inside, _ring_allreduce(grad_bytes * groups_per_node, dp, node_bw, links.net_lat, chunks))


@dataclass(frozen=True, slots=True)
class _Memory:
    layer_states: float
    embedding_states: float
    activations: float
    peak_activations: float

    @property
    def total(self) -> float:
        return self.layer_states + self.embedding_states + self.peak_activations


def _memory(model: ModelSpec, plan: Plan, micro_batches: int) -> _Memory:
    """Bytes on the busiest GPU: the first stage keeps the most micro-batches in flight, the last one the
    logits; both hold the (tied) embedding."""
    tp, pp, dp, b, v = plan.key()
    layers = model.stage_layers(pp)
    states_per_param = model.model_state_bytes_per_param(dp)
    per_layer = model.layer_activation_bytes(b, tp)
    interleave = 1.0 + (pp - 1) / (pp * v) if v > 1 else 1.0
    first = layers * per_layer * min(micro_batches, pp) * interleave
    if model.recompute is Recompute.FULL:
        working = model.layer_working_bytes(b, tp)
    elif model.recompute is Recompute.SELECTIVE:
        working = 5.0 * model.heads * model.seq * model.seq * b / tp
    else:
        working = 0.0
    logits = 4.0 * model.seq * b * model.vocab / tp
    last = layers * per_layer * interleave + logits
    peak = max(first + (logits if pp == 1 else 0.0), last) + working
    # Tied: both end stages hold the one matrix. Untied: the first holds the embedding, the last the output
    # projection, one GPU both when pp = 1.
    vocab_params = model.embedding_params + (model.output_params if pp == 1 else 0.0)
    return _Memory(
        layer_states=layers * model.layer_params / tp * states_per_param,
        embedding_states=vocab_params / tp * states_per_param,
        activations=first,
        peak_activations=peak,
    )


def evaluate(
    model: ModelSpec,
    cluster: Cluster,
    plan: Plan,
    *,
    memory_headroom: float = 0.9,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    uneven_pipeline: bool = False,
    placement: Placement | str = "auto",
) -> Evaluation:
    """Predict one plan's step. Raises PlanError if the plan cannot be laid out; a plan that runs but needs
    more than ``memory_headroom`` of GPU memory comes back with ``feasible`` False. ``placement``: ``"auto"``
    (slow nodes off the critical stage, :func:`placement.place`), ``"rank-order"`` (Megatron's default
    layout), or a :class:`Placement` computed once for many plans of one pipeline depth."""
    check_plan(model, cluster, plan, uneven_pipeline=uneven_pipeline)
    eff = efficiency
    pp, dp, v = plan.pp, plan.dp, plan.virtual
    m = model.global_batch // (dp * plan.micro_batch)
    links = _Links.of(model, cluster, eff)
    peak, hbm = links.peak_flops, links.hbm_bw
    work = _stage_work(model, plan, links, eff)

    if isinstance(placement, str):
        if placement not in {"auto", "rank-order"}:
            raise ValueError(f"placement must be auto or rank-order, got {placement!r}")
        placement = place(cluster, pp) if placement == "auto" else rank_order(cluster, pp)
    speeds = placement.speeds
    fixed = work.tp_s + work.pp_s + eff.micro_batch_overhead_s
    stage_times = [
        (work.compute_s + (work.logits_s if i == pp - 1 else 0.0)) / speeds[i] + fixed for i in range(pp)
    ]
    slowest = max(range(pp), key=stage_times.__getitem__)
    t_stage = stage_times[slowest]
    speed = speeds[slowest]
    bubble_fraction = (pp - 1) / (v * m)
    bubble_s = m * t_stage * bubble_fraction
    compute_s = m * (work.compute_s + (work.logits_s if slowest == pp - 1 else 0.0)) / speed

    # The first and last stages also hold the (tied) embedding; the step waits for the slowest stage.
    vocab_params = model.embedding_params + (model.output_params if pp == 1 else 0.0)
    local_params = (model.stage_layers(pp) * model.layer_params + vocab_params) / plan.tp
    # The distributed optimizer reduce-scatters the gradients and all-gathers the updated 16-bit weights:
    # half an all-reduce of each, so grad_bytes + 2 bytes per parameter instead of 2 x grad_bytes.
    wire_bytes = (model.grad_bytes + 2.0) / 2.0 if model.distributed_optimizer else float(model.grad_bytes)
    dp_comm_s = _dp_allreduce(local_params * wire_bytes, plan, links, eff)
    passes = model.layer_passes().elementwise
    last_backward = work.compute_s * (passes - 1.0) / passes / speed
    if model.comm_overlap:
        # Bucketed: the reduce-scatter runs behind the last micro-batch's backward pass and the weight
        # all-gather behind the first one's forward pass.
        dp_exposed_s = max(0.0, dp_comm_s - work.compute_s / speed)
    else:
        dp_exposed_s = dp_comm_s - min(eff.dp_overlap * dp_comm_s, last_backward)
    updated = local_params / (dp if model.optimizer_sharding is OptimizerSharding.ZERO1 else 1)
    optimizer_s = updated * eff.optimizer_bytes_per_param / hbm / speed
    if links.fp8_transpose is not None:
        # Transformer Engine casts the updated block weights (and their transposes) once per step.
        cast = eff.fp8_cast_bytes + links.fp8_transpose
        optimizer_s += model.stage_layers(pp) * model.layer_params / plan.tp * cast / hbm / speed
    step = m * t_stage + bubble_s + dp_exposed_s + optimizer_s

    memory = _memory(model, plan, m)
    memory_gib = memory.total / GIB
    limit = cluster.gpu.memory_gib * memory_headroom
    feasible = memory_gib <= limit
    reason = (
        ""
        if feasible
        else f"needs {memory_gib:.1f} GiB per GPU, above {limit:.1f} GiB ({memory_headroom:.0%})"
    )
    return Evaluation(
        plan=plan,
        micro_batches=m,
        step_time_s=step,
        compute_s=compute_s,
        tp_comm_s=m * work.tp_s,
        pp_comm_s=m * work.pp_s,
        bubble_s=bubble_s,
        dp_comm_s=dp_comm_s,
        dp_exposed_s=dp_exposed_s,
        optimizer_s=optimizer_s,
        schedule_s=m * eff.micro_batch_overhead_s,
        bubble_fraction=bubble_fraction,
        tflops_per_gpu=model.hardware_flops_per_iteration() / cluster.gpus / step / 1e12,
        model_flops_utilization=model.model_flops_per_iteration() / cluster.gpus / step / peak,
        layer_states_gib=memory.layer_states / GIB,
        embedding_states_gib=memory.embedding_states / GIB,
        activations_gib=memory.activations / GIB,
        working_gib=(memory.peak_activations - memory.activations) / GIB,
        memory_gib_per_gpu=memory_gib,
        memory_limit_gib=limit,
        feasible=feasible,
        reason=reason,
        tokens_per_s=model.global_batch * model.seq / step,
        cost_per_hour=cluster.gpus * cluster.price_per_gpu_hour,
        recompute=model.recompute.value,
        sequence_parallel=model.sp,
        distributed_optimizer=model.distributed_optimizer,
        precision=model.precision.value,
        stage_nodes=placement.stage_nodes if not cluster.uniform else (),
    )
