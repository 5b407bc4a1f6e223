"""Every node's speed, as a job reports it on its plan request (``node_speeds``), and as per-GPU speed factors.

The runtime's CloudWatch signal names only the slowest node (two series per job, whatever its size), so two
slow nodes look like one. A job that gathers every rank's compute time anyway
(``osprey.runtime.gather_compute_times``) can hand the whole vector to ``osprey.adjust_parallelism(...,
node_speeds=...)``, which writes it on the request with the job's step: one attribute, no metric cost, and it
is removed by the next progress report that carries none, so the plan step never reads stale speeds.

    node_speeds  JSON string: a list of one speed per node, in the job's node order (torchrun's node rank);
                 1.0 is the median rank, 0.95 a node 5% slower (``placement.node_speeds_from_rank_times``)

A node at :data:`STRAGGLER_SPEED` or faster is nominal (a couple of percent between ranks is noise). Pure
Python, no AWS import.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["critical_stage_speed", "node_speeds_json", "rank_order_nodes"]

NODE_SPEEDS_ATTRIBUTE = "node_speeds"
# Below this a node is a straggler; above, a difference of a couple of percent is noise between ranks.
STRAGGLER_SPEED = 0.98
# Four decimals: a tenth of a per-mille, far below the noise, and a 1,000-node job stays under 10 KB.
_DIGITS = 4


def node_speeds_json(speeds: Sequence[float]) -> str:
    """The request attribute's value for ``speeds``. ``ValueError`` naming ``node_speeds`` unless it is a
    non-empty list of finite positive numbers."""
    if isinstance(speeds, str | bytes) or not isinstance(speeds, Sequence) or not speeds:
        raise ValueError(f"node_speeds must be a non-empty list of one speed per node, got {speeds!r}")
    for index, speed in enumerate(speeds):
        valid = isinstance(speed, int | float) and not isinstance(speed, bool) and math.isfinite(speed)
        if not valid or speed <= 0:
            raise ValueError(
                f"node_speeds[{index}] must be a finite positive number (1.0 = nominal), got {speed!r}"
            )
    return json.dumps([round(float(speed), _DIGITS) for speed in speeds])


def node_speeds_of(text: Any) -> tuple[float, ...]:
    """The speeds of a ``node_speeds`` attribute value; () when absent or unreadable (a hand-edited item costs
    the plan step this signal only: it falls back to the slowest-node metric)."""
    if not isinstance(text, str) or not text:
        return ()
    try:
        values = json.loads(text)
        return tuple(float(v) for v in json.loads(node_speeds_json(values)))
    except (ValueError, TypeError):
        return ()


def _as_planned(speed: float) -> float:
    """A node's speed as the planner takes it: a straggler's own, nominal (1.0) at :data:`STRAGGLER_SPEED` or
    faster (noise, or faster than the median)."""
    return speed if speed < STRAGGLER_SPEED else 1.0


def slow_node_factors(speeds: Sequence[float], gpus_per_node: int) -> tuple[float, ...]:
    """Per-GPU speed factors: each node's GPUs at its speed as planned (:func:`_as_planned`)."""
    return tuple(_as_planned(speed) for speed in speeds for _ in range(gpus_per_node))


def critical_stage_speed(stage_nodes: Sequence[Sequence[int]], speeds: Sequence[float]) -> float:
    """How fast the last pipeline stage (the critical one: it also runs the logits) runs with nodes
    ``stage_nodes`` at ``speeds``: its slowest node's speed as planned."""
    return min(_as_planned(speeds[node]) for node in stage_nodes[-1])


def rank_order_nodes(nodes: int, pp: int) -> tuple[tuple[int, ...], ...]:
    """Megatron's rank order as node indices per stage (``pp`` must divide ``nodes``)."""
    per = nodes // pp
    return tuple(tuple(range(stage * per, (stage + 1) * per)) for stage in range(pp))
