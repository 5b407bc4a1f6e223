"""Why a search found no plan, in one sentence a user can act on.

Two causes: no layout exists at all (every tensor x pipeline degree leaves a data-parallel size that does not
divide the global batch, the only constraint that can exclude tp = pp = 1), or layouts exist but none fits in
memory (then the least memory any of them needs is set against what the GPU offers).
"""

from __future__ import annotations

from osprey_control.planner.hardware import Cluster
from osprey_control.planner.model import ModelSpec
from osprey_control.planner.search import SearchOptions, SearchResult, divisors

__all__ = ["no_plan_reason"]


def _model_parallel_sizes(model: ModelSpec, cluster: Cluster, options: SearchOptions) -> list[int]:
    tps = [t for t in divisors(cluster.gpus_per_node) if model.splits_heads(t)]
    pps = list(range(1, model.layers + 1)) if options.uneven_pipeline else divisors(model.layers)
    return sorted({t * p for t in tps for p in pps if cluster.gpus % (t * p) == 0})


def no_plan_reason(model: ModelSpec, cluster: Cluster, options: SearchOptions, result: SearchResult) -> str:
    """The reason ``result`` has no best plan ("" when it has one)."""
    if result.best is not None:
        return ""
    if result.evaluated == 0 or not result.candidates:
        sizes = _model_parallel_sizes(model, cluster, options)
        shown = ", ".join(str(s) for s in sizes[:12]) + (", ..." if len(sizes) > 12 else "")
        return (
            f"no data-parallel size divides the global batch {model.global_batch} for {cluster.gpus} GPUs "
            f"with tp*pp in {{{shown}}}; choose a global batch divisible by one of "
            f"{', '.join(str(cluster.gpus // s) for s in sizes[:12])}"
        )
    smallest = min(result.candidates, key=lambda e: e.memory_gib_per_gpu)
    return (
        f"no plan fits in memory: the smallest needs {smallest.memory_gib_per_gpu:.1f} GiB per GPU "
        f"({smallest.plan.tp}x{smallest.plan.pp}x{smallest.plan.dp} b{smallest.plan.micro_batch}, "
        f"recompute {smallest.recompute}), the GPU has {cluster.gpu.memory_gib:g} GiB "
        f"({smallest.memory_limit_gib:.1f} usable at headroom {options.memory_headroom:g}); "
        "add GPUs or allow more recompute or optimizer sharding"
    )
