"""Apply a plan's ``stage_nodes`` (straggler placement) by re-ordering the ranks of the job's process groups.

The planner (``osprey_control.planner.placement.place``) keeps a slow node off the last, critical pipeline
stage; each plan record carries the result as ``stage_nodes``: for each stage, the node indices (0-based, in
the job's host order: torchrun's node rank) that should run it, or null when every node is nominal.

Megatron lays ranks out tp innermost, then dp, then pp (pp outermost): the *logical* rank of coordinate
(p, d, t) is ``(p * dp + d) * tp + t``, so in rank order node order is stage order. Applying ``stage_nodes``
means running Megatron's layout on the nodes re-ordered as ``stage_nodes`` flattened: logical node ``k`` is
physical node ``order[k]``, and logical rank ``r`` is the process with global (*physical*) rank
``order[r // gpus_per_node] * gpus_per_node + r % gpus_per_node`` (the same local slot on that node).

Decisions:

- The job keeps its torchrun ranks (no restart, no new rendezvous, no host file to rewrite): only the rank
  lists of its tp, dp and pp process groups change (:func:`process_group_ranks`, or a ``DeviceMesh`` built
  from the permutation reshaped to (pp, dp, tp)). A job applies it where it builds its groups anyway: at the
  re-shape to a new plan, which already moves every stage's weights through a checkpoint.
- Within a node the local order is kept, so a tp group that fits in a node is still ascending; only the pp
  groups (and dp groups over nodes listed out of order) are not. ``torch.distributed.new_group`` sorts its
  ranks, so a process takes its stage (and dp, tp) index from its position in these lists (or its
  ``DeviceMesh`` coordinate), never from the group's own rank.
- null or an empty list is rank order (the identity). Anything else must name every node exactly once, in
  ``pp`` stages of whole, equal numbers of nodes; otherwise :class:`StageNodesError` (a ``ValueError``) names
  the field and what is allowed, and nothing is applied.

Pure Python, no torch import: the same lists serve ``new_group``, ``DeviceMesh`` or another launcher.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["StageNodesError", "process_group_ranks", "rank_permutation"]


class StageNodesError(ValueError):
    """``stage_nodes`` (or the sizes given with it) that cannot be applied; the message names the field."""


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StageNodesError(f"{name}: must be a positive integer, got {value!r}")
    return value


def _sizes(tp: object, dp: object, pp: object) -> tuple[int, int, int]:
    return _positive("tp", tp), _positive("dp", dp), _positive("pp", pp)


def _node_order(stage_nodes: Sequence[Sequence[int]], nodes: int, per_stage: int, pp: int) -> list[int]:
    if isinstance(stage_nodes, str | bytes) or not isinstance(stage_nodes, Sequence):
        raise StageNodesError(
            f"stage_nodes: must be null or a list of {pp} lists of node indices, got {stage_nodes!r}"
        )
    if len(stage_nodes) != pp:
        raise StageNodesError(
            f"stage_nodes: must list one entry per pipeline stage (pp = {pp}), got {len(stage_nodes)}"
        )
    owner: dict[int, int] = {}
    for index, stage in enumerate(stage_nodes):
        field = f"stage_nodes[{index}]"
        if isinstance(stage, str | bytes) or not isinstance(stage, Sequence):
            raise StageNodesError(f"{field}: must be a list of node indices, got {stage!r}")
        if len(stage) != per_stage:
            raise StageNodesError(
                f"{field}: must list {per_stage} node(s) (each stage has {nodes // pp} of the {nodes} "
                f"nodes), got {len(stage)}"
            )
        for node in stage:
            if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < nodes:
                raise StageNodesError(f"{field}: node indices are integers 0 to {nodes - 1}, got {node!r}")
            if node in owner:
                raise StageNodesError(
                    f"{field}: node {node} is already in stage_nodes[{owner[node]}]; each node runs one stage"
                )
            owner[node] = index
    # pp stages of per_stage distinct nodes in range(nodes), and pp * per_stage == nodes: every node once.
    return [node for stage in stage_nodes for node in stage]


def rank_permutation(
    stage_nodes: Sequence[Sequence[int]] | None, *, gpus_per_node: int, tp: int, dp: int, pp: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(to_physical, to_logical)``: ``to_physical[r]`` is the global rank of the process that plays
    Megatron's logical rank ``r`` once the nodes run the stages of ``stage_nodes``; ``to_logical`` is its
    inverse (``to_logical[rank]``: this process's logical rank, whose coordinate is
    ``(r // (dp * tp), r // tp % dp, r % tp)``). null or empty ``stage_nodes``: the identity.

    Raises :class:`StageNodesError` naming the field: sizes that are not positive integers, ``tp x dp x pp``
    not whole nodes of ``gpus_per_node``, or ``stage_nodes`` that is not ``pp`` lists of equally many whole
    nodes naming each node exactly once (a stage of fewer GPUs than a node cannot be placed: null)."""
    tp, dp, pp = _sizes(tp, dp, pp)
    per_node = _positive("gpus_per_node", gpus_per_node)
    world = tp * dp * pp
    if world % per_node:
        raise StageNodesError(
            f"gpus_per_node: must divide tp x dp x pp = {world} (whole nodes), got {per_node}"
        )
    identity = tuple(range(world))
    if stage_nodes is None or (isinstance(stage_nodes, Sequence) and len(stage_nodes) == 0):
        return identity, identity
    if (tp * dp) % per_node:
        raise StageNodesError(
            f"stage_nodes: must be null when a stage (tp x dp = {tp * dp} GPUs) is not whole nodes of "
            f"{per_node} GPUs: placement moves whole nodes"
        )
    order = _node_order(stage_nodes, world // per_node, tp * dp // per_node, pp)
    to_physical = tuple(order[rank // per_node] * per_node + rank % per_node for rank in identity)
    to_logical = [0] * world
    for logical, physical in enumerate(to_physical):
        to_logical[physical] = logical
    return to_physical, tuple(to_logical)


def process_group_ranks(
    to_physical: Sequence[int], *, tp: int, dp: int, pp: int
) -> dict[str, list[list[int]]]:
    """The global ranks of every ``tp``, ``dp`` and ``pp`` group for ``torch.distributed.new_group``, each
    list in logical order (position = the coordinate along that dimension: a pp list runs from the first
    stage to the last). Every process creates every group, in this order (tp, dp, pp), and keeps the ones it
    is in. ``to_physical`` is :func:`rank_permutation`'s first result."""
    tp, dp, pp = _sizes(tp, dp, pp)
    ranks = list(to_physical)
    if sorted(ranks) != list(range(tp * dp * pp)):
        raise StageNodesError(
            f"to_physical: must be a permutation of the {tp * dp * pp} ranks 0 to {tp * dp * pp - 1} "
            f"(tp x dp x pp), got {len(ranks)} values"
        )

    def at(p: int, d: int, t: int) -> int:
        return ranks[(p * dp + d) * tp + t]

    return {
        "tp": [[at(p, d, t) for t in range(tp)] for p in range(pp) for d in range(dp)],
        "dp": [[at(p, d, t) for d in range(dp)] for p in range(pp) for t in range(tp)],
        "pp": [[at(p, d, t) for p in range(pp)] for d in range(dp) for t in range(tp)],
    }
