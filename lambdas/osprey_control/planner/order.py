"""The identity of the plan a job runs: its degrees and the node order it runs them in (a plan record's
``stage_nodes`` once it applied them). One key for the plan request's ``current_key``, the job's progress
report and ``adjust_parallelism``'s comparison, so all three agree on when a straggler moved. Pure Python."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from osprey_control.planner.plan import Plan

__all__ = ["out_of_rank_order"]


def out_of_rank_order(stage_nodes: Sequence[Sequence[int]]) -> bool:
    """Whether ``stage_nodes`` moves a node from Megatron's rank order (stage by stage, ascending)."""
    flat = [node for stage in stage_nodes for node in stage]
    return flat != sorted(flat)


def plan_key(plan: Plan, stage_nodes: Sequence[Sequence[int]] = ()) -> str:
    """``"tp,pp,dp,micro_batch,virtual"`` (and ``|`` with the node order when it is not rank order): the
    ``current_key`` attribute, so moving a straggler is a change of plan for ``since_step`` too."""
    key = ",".join(str(value) for value in plan.key())
    if out_of_rank_order(stage_nodes):
        key += "|" + ";".join(",".join(str(node) for node in stage) for stage in stage_nodes)
    return key


def stage_nodes_of(value: Any) -> tuple[tuple[int, ...], ...]:
    """``stage_nodes`` as a tuple of tuples of node indices; () for None or anything that is not a list of
    lists of non-negative integers (the job runs rank order when it cannot apply them)."""
    if not isinstance(value, list | tuple) or not all(isinstance(stage, list | tuple) for stage in value):
        return ()
    stages = tuple(tuple(stage) for stage in value)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for stage in stages for n in stage):
        return ()
    return stages


def parse_plan_key(key: str) -> tuple[Plan, tuple[tuple[int, ...], ...]]:
    """The plan and node order of a :func:`plan_key` (order () for rank order). ``ValueError`` (with the key)
    when it is not one: five positive integers, optionally ``|`` and stages of comma-separated node indices
    separated by ``;``."""
    degrees, _, order = key.partition("|")
    try:
        tp, pp, dp, micro_batch, virtual = (int(part) for part in degrees.split(","))
        stages = (
            tuple(tuple(int(node) for node in stage.split(",")) for stage in order.split(";"))
            if order
            else ()
        )
    except ValueError:
        raise ValueError(
            f"{key!r} is not a plan key (tp,pp,dp,micro_batch,virtual[|nodes;nodes...])"
        ) from None
    if min(tp, pp, dp, micro_batch, virtual) < 1 or any(node < 0 for stage in stages for node in stage):
        raise ValueError(f"{key!r} is not a plan key: degrees must be positive and node indices non-negative")
    return Plan(tp, pp, dp, micro_batch, virtual), stages
