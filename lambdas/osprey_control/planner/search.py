"""Search over valid plans: every (tp, pp, dp, micro_batch, virtual) the layout constraints allow, times the
model-side options (``Knobs``: recompute, sequence parallelism, distributed optimizer, precision), scored by
throughput / (cost x idle penalty), best first.

Options that cannot differ are not tried twice: sequence parallelism needs tp > 1, the distributed optimizer
dp > 1, FP8 a GPU with FP8 tensor cores (``precision`` lists it only where the GPU has it).

Memory grows with the micro-batch (activations scale with b; the in-flight count min(m, pp) times b never
shrinks), so micro-batches are tried smallest first and a pipeline shape stops at the first that does not
fit; shapes whose model states alone do not fit are skipped before any micro-batch is tried.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from osprey_control.planner.costmodel import DEFAULT_EFFICIENCY, Efficiency, evaluate
from osprey_control.planner.hardware import Cluster
from osprey_control.planner.model import ModelSpec, OptimizerSharding, Precision, Recompute
from osprey_control.planner.placement import Placement, place
from osprey_control.planner.plan import Evaluation, Plan

__all__ = ["Knobs", "SearchOptions", "SearchResult", "search", "search_exhaustive", "variants"]

# Megatron's interleaved schedule: up to 8 model chunks per GPU are searched unless the job says fewer.
DEFAULT_MAX_VIRTUAL = 8


@dataclass(frozen=True, slots=True)
class Knobs:
    """The model-side options the search may vary; each field lists the values to try. The defaults are
    what Megatron's published configurations choose among: every recompute mode, sequence parallelism on
    and off, the distributed optimizer on and off, 16-bit arithmetic (FP8 changes the numerics, so it is
    tried only when listed)."""

    recompute: tuple[Recompute, ...] = tuple(Recompute)
    sequence_parallel: tuple[bool, ...] = (False, True)
    distributed_optimizer: tuple[bool, ...] = (False, True)
    precision: tuple[Precision, ...] = (Precision.BF16,)

    def __post_init__(self) -> None:
        for name in ("recompute", "sequence_parallel", "distributed_optimizer", "precision"):
            if not getattr(self, name):
                raise ValueError(f"knobs.{name} must list at least one value")


def variants(model: ModelSpec, cluster: Cluster, knobs: Knobs | None, tp: int, dp: int) -> list[ModelSpec]:
    """The model under every combination of ``knobs`` that can differ for this tp and dp (``None``: the
    model as given)."""
    if knobs is None:
        return [model]
    sp_values = knobs.sequence_parallel if tp > 1 else (False,)
    do_values = knobs.distributed_optimizer if dp > 1 else (False,)
    precisions = [p for p in knobs.precision if p is not Precision.FP8 or cluster.gpu.has_fp8]
    result = []
    for recompute, sp, do, precision in itertools.product(knobs.recompute, sp_values, do_values, precisions):
        result.append(
            dataclasses.replace(
                model,
                recompute=recompute,
                sequence_parallel=sp,
                optimizer_sharding=OptimizerSharding.ZERO1 if do else OptimizerSharding.NONE,
                precision=precision,
            )
        )
    return result


@dataclass(frozen=True, slots=True)
class SearchOptions:
    memory_headroom: float = 0.9
    top_k: int = 5
    uneven_pipeline: bool = False
    # Chunks per GPU of the interleaved schedule (1: the job's pipeline has none).
    max_virtual: int = DEFAULT_MAX_VIRTUAL
    # False keeps plans above the memory limit in the ranking (still reported with feasible=False): for
    # what-if studies of throughput alone.
    enforce_memory: bool = True
    efficiency: Efficiency = DEFAULT_EFFICIENCY
    # None: evaluate the model exactly as given (its recompute, optimizer sharding, precision).
    knobs: Knobs | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.memory_headroom <= 1.0:
            raise ValueError(f"memory_headroom must be in (0, 1], got {self.memory_headroom!r}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be a positive integer, got {self.top_k!r}")
        if self.max_virtual < 1:
            raise ValueError(f"max_virtual must be a positive integer, got {self.max_virtual!r}")


@dataclass(frozen=True, slots=True)
class SearchResult:
    """``best`` is None when no plan fits in memory; ``candidates`` then holds the least-memory plans."""

    best: Evaluation | None
    candidates: tuple[Evaluation, ...]
    evaluated: int
    feasible: int
    everything: tuple[Evaluation, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "best": self.best.to_dict() if self.best else None,
            "candidates": [c.to_dict() for c in self.candidates],
        }


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _tp_degrees(model: ModelSpec, cluster: Cluster) -> list[int]:
    per_node = cluster.gpus_per_node
    inside = [t for t in divisors(per_node) if model.splits_heads(t)]
    if not cluster.allow_cross_node_tp:
        return inside
    across = [per_node * k for k in divisors(cluster.nodes) if k > 1 and model.splits_heads(per_node * k)]
    return inside + across


def _pp_degrees(model: ModelSpec, options: SearchOptions) -> list[int]:
    return list(range(1, model.layers + 1)) if options.uneven_pipeline else divisors(model.layers)


def _virtual_degrees(model: ModelSpec, pp: int, micro_batches: int, options: SearchOptions) -> list[int]:
    if pp == 1 or micro_batches % pp or model.layers % pp:
        return [1]
    return [v for v in divisors(model.layers // pp) if v <= options.max_virtual]


def enumerate_plans(model: ModelSpec, cluster: Cluster, options: SearchOptions) -> Iterator[Plan]:
    """Every plan the layout constraints allow (no cost model involved), in (tp, pp, b, v) order."""
    for tp in _tp_degrees(model, cluster):
        for pp in _pp_degrees(model, options):
            if cluster.gpus % (tp * pp):
                continue
            dp = cluster.gpus // (tp * pp)
            if model.global_batch % dp:
                continue
            for b in divisors(model.global_batch // dp):
                m = model.global_batch // (dp * b)
                for v in _virtual_degrees(model, pp, m, options):
                    yield Plan(tp, pp, dp, b, v)


def _rank(evaluations: list[Evaluation], feasible: list[Evaluation], top_k: int, keep: bool) -> SearchResult:
    if feasible:
        top = heapq.nlargest(top_k, feasible, key=lambda e: (e.score, -e.memory_gib_per_gpu))
        best: Evaluation | None = top[0]
    else:
        top = heapq.nsmallest(top_k, evaluations, key=lambda e: e.memory_gib_per_gpu)
        best = None
    return SearchResult(
        best=best,
        candidates=tuple(top),
        evaluated=len(evaluations),
        feasible=len(feasible),
        everything=tuple(evaluations) if keep else (),
    )


def search(
    model: ModelSpec, cluster: Cluster, options: SearchOptions | None = None, *, keep_all: bool = False
) -> SearchResult:
    """The best plan and the top-k (by score), with memory pruning; ``keep_all`` keeps every evaluation
    (for plotting the search space)."""
    options = options or SearchOptions()
    evaluations: list[Evaluation] = []
    feasible: list[Evaluation] = []
    for tp in _tp_degrees(model, cluster):
        for pp in _pp_degrees(model, options):
            if cluster.gpus % (tp * pp):
                continue
            dp = cluster.gpus // (tp * pp)
            if model.global_batch % dp:
                continue
            placement = place(cluster, pp)
            for variant in variants(model, cluster, options.knobs, tp, dp):
                found = _search_shape(variant, cluster, options, (tp, pp, dp), placement)
                evaluations.extend(found)
                feasible.extend(e for e in found if e.feasible or not options.enforce_memory)
    return _rank(evaluations, feasible, options.top_k, keep_all)


def _search_shape(
    model: ModelSpec,
    cluster: Cluster,
    options: SearchOptions,
    shape: tuple[int, int, int],
    placement: Placement,
) -> list[Evaluation]:
    """Every micro-batch and interleaving of one (tp, pp, dp), smallest micro-batch first."""
    tp, pp, dp = shape
    evaluations: list[Evaluation] = []
    for b in divisors(model.global_batch // dp):
        m = model.global_batch // (dp * b)
        fits = False
        for v in _virtual_degrees(model, pp, m, options):
            evaluation = evaluate(
                model,
                cluster,
                Plan(tp, pp, dp, b, v),
                memory_headroom=options.memory_headroom,
                efficiency=options.efficiency,
                uneven_pipeline=options.uneven_pipeline,
                placement=placement,
            )
            evaluations.append(evaluation)
            fits = fits or evaluation.feasible or not options.enforce_memory
        if not fits:
            # A larger micro-batch needs at least as much memory: nothing further fits.
            break
    return evaluations


def search_exhaustive(
    model: ModelSpec, cluster: Cluster, options: SearchOptions | None = None
) -> SearchResult:
    """The baseline: evaluate every valid plan independently, with no pruning and nothing shared."""
    options = options or SearchOptions()
    evaluations = [
        evaluate(
            variant,
            cluster,
            plan,
            memory_headroom=options.memory_headroom,
            efficiency=options.efficiency,
            uneven_pipeline=options.uneven_pipeline,
        )
        for plan in enumerate_plans(model, cluster, options)
        for variant in variants(model, cluster, options.knobs, plan.tp, plan.dp)
    ]
    ranked = [e for e in evaluations if e.feasible or not options.enforce_memory]
    return _rank(evaluations, ranked, options.top_k, False)
