"""Which nodes run which pipeline stage, when nodes differ in speed (stragglers).

A stage runs at the speed of its slowest GPU over every data-parallel replica, and the pipeline at the speed
of its slowest stage, so one slow node slows the whole step unless it sits on a stage with slack. The last
stage is the critical one: it also runs the output projection onto the vocabulary (the logits), so it is the
heaviest; the others carry the same blocks (the first also the embedding lookup, which is memory traffic,
not FLOPs).

Megatron's rank order (tp innermost, then dp, then pp) puts the last nodes of the job on the last stage
(``rank_order``). ``place`` instead gives the last stage the fastest nodes: the other stages carry the same
work, so which of them holds a slow node does not matter, and the slowest stage's time is minimal when the
heaviest stage has the fastest nodes. It moves as few nodes as it can: each slow node of the last stage
swaps places with the fastest node elsewhere (preferring, among equally fast ones, the nearest stage), so a
job re-orders two hosts per straggler, not all of them. Placement is by whole nodes; when a node holds GPUs of several stages
(fewer GPUs per stage than a node has), nodes cannot be moved between stages and the rank order stands.

Decision: a job adopts a placement by ordering its hosts (e.g. torchrun's node rank, or a hostfile) so
that the nodes of ``stage_nodes`` come in that order; the plan's JSON carries it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from osprey_control.planner.hardware import Cluster
from osprey_control.planner.order import out_of_rank_order
from osprey_control.planner.speeds import rank_order_nodes

__all__ = ["node_speeds_from_rank_times"]


@dataclass(frozen=True, slots=True)
class Placement:
    """Per-stage speed (1.0 nominal) and, when nodes could be placed, the node indices of each stage."""

    speeds: tuple[float, ...]
    stage_nodes: tuple[tuple[int, ...], ...] = ()

    @property
    def moved(self) -> bool:
        """Whether the nodes differ from Megatron's rank order."""
        return out_of_rank_order(self.stage_nodes)


def node_speeds(cluster: Cluster) -> list[float]:
    """Each node's speed: its slowest GPU's."""
    per = cluster.gpus_per_node
    return [min(cluster.speed(node * per + i) for i in range(per)) for node in range(cluster.nodes)]


def _nodes_per_stage(cluster: Cluster, pp: int) -> int:
    per_stage = cluster.gpus // pp
    return per_stage // cluster.gpus_per_node if per_stage % cluster.gpus_per_node == 0 else 0


def rank_order(cluster: Cluster, pp: int) -> Placement:
    """Megatron's layout: stage i on GPUs [i*G/pp, (i+1)*G/pp)."""
    if cluster.uniform:
        return Placement((cluster.speed(0),) * pp)
    block = cluster.gpus // pp
    speeds = tuple(min(cluster.speed_factors[i * block : (i + 1) * block]) for i in range(pp))
    per = _nodes_per_stage(cluster, pp)
    nodes = rank_order_nodes(cluster.nodes, pp) if per else ()
    return Placement(speeds, nodes)


def running(cluster: Cluster, pp: int, stage_nodes: Sequence[Sequence[int]] = ()) -> Placement:
    """The placement a job runs: ``stage_nodes`` as it applied them (node indices per stage), or Megatron's
    rank order when it applied none, or when they do not describe ``pp`` stages of whole nodes of this
    cluster (a job that could not apply them runs in rank order, ``osprey.stages``)."""
    default = rank_order(cluster, pp)
    per = _nodes_per_stage(cluster, pp)
    order = [node for stage in stage_nodes for node in stage]
    valid = (
        per > 0
        and len(stage_nodes) == pp
        and all(len(stage) == per for stage in stage_nodes)
        and sorted(order) == list(range(cluster.nodes))
    )
    if not valid:
        return default
    speeds = node_speeds(cluster)
    nodes = tuple(tuple(sorted(stage)) for stage in stage_nodes)
    return Placement(tuple(min(speeds[n] for n in stage) for stage in nodes), nodes)


def place(cluster: Cluster, pp: int) -> Placement:
    """The fastest nodes on the last (critical) stage, by swapping each slow node there with the fastest
    node of another stage; the rank order when that gains nothing."""
    per = _nodes_per_stage(cluster, pp)
    default = rank_order(cluster, pp)
    if cluster.uniform or pp == 1 or not per:
        return default
    speeds = node_speeds(cluster)
    stages = [list(nodes) for nodes in default.stage_nodes]
    last = stages[-1]
    # Fastest outside the last stage first; among equals the highest index (the stage nearest the last).
    donors = sorted(
        ((stage, node) for stage in range(pp - 1) for node in stages[stage]),
        key=lambda item: (-speeds[item[1]], -item[1]),
    )
    for index in sorted(range(per), key=lambda i: speeds[last[i]]):
        if not donors or speeds[donors[0][1]] <= speeds[last[index]]:
            break
        stage, node = donors.pop(0)
        position = stages[stage].index(node)
        stages[stage][position], last[index] = last[index], node
    stage_nodes = tuple(tuple(sorted(nodes)) for nodes in stages)
    return Placement(tuple(min(speeds[n] for n in nodes) for nodes in stage_nodes), stage_nodes)


def node_speeds_from_rank_times(rank_seconds: Sequence[float], gpus_per_node: int) -> list[float]:
    """Per-node speed from each rank's compute time per step (ranks in order, ``gpus_per_node`` to a node):
    a rank's speed is the median rank's time over its own, a node's that of its slowest rank. Compute time,
    not step time: a synchronous step takes as long on every rank (the fast ones wait)."""
    if gpus_per_node < 1 or not rank_seconds or len(rank_seconds) % gpus_per_node:
        raise ValueError(
            f"need one compute time per rank for whole nodes of {gpus_per_node}, got {len(rank_seconds)}"
        )
    if any(not math.isfinite(t) or t <= 0 for t in rank_seconds):
        raise ValueError("compute times must be positive numbers")
    typical = statistics.median(rank_seconds)
    return [
        min(typical / t for t in rank_seconds[node * gpus_per_node : (node + 1) * gpus_per_node])
        for node in range(len(rank_seconds) // gpus_per_node)
    ]


def speed_factors_with_slow_node(cluster: Cluster, node: int, speed: float) -> tuple[float, ...]:
    """Per-GPU speed factors of ``cluster`` with every GPU of ``node`` at ``speed`` and the rest nominal."""
    if not 0 <= node < cluster.nodes:
        raise ValueError(f"node {node} is not one of the {cluster.nodes} nodes")
    if not math.isfinite(speed) or speed <= 0:
        raise ValueError(f"speed must be a positive number, got {speed!r}")
    per = cluster.gpus_per_node
    return tuple(speed if rank // per == node else 1.0 for rank in range(cluster.gpus))
