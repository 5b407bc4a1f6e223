"""``osprey.stages`` (re-exported by ``osprey.runtime``): a plan's ``stage_nodes`` applied as a rank
permutation and process-group rank lists, from the planner's own placement of a slow node; the lists used
with ``torch.distributed.new_group`` by 4 real gloo processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import osprey
from osprey import runtime
from osprey.parallelism import recommended_record
from osprey_control.planner.hardware import cluster
from osprey_control.planner.placement import place, speed_factors_with_slow_node


def _placed_slow_node(nodes: int, slow: int, pp: int) -> tuple[tuple[tuple[int, ...], ...], int]:
    """``place``'s stage_nodes on ``nodes`` p5.48xlarge nodes, node ``slow`` 5% slow; and GPUs per node."""
    nominal = cluster(nodes * 8, instance_type="p5.48xlarge")
    slowed = cluster(
        nodes * 8,
        instance_type="p5.48xlarge",
        speed_factors=speed_factors_with_slow_node(nominal, slow, 0.95),
    )
    return place(slowed, pp).stage_nodes, nominal.gpus_per_node


def _stage_of(groups: dict[str, list[list[int]]], rank: int) -> int:
    """The stage ``rank`` runs: its position in its pp group (first stage to last)."""
    (position,) = [group.index(rank) for group in groups["pp"] if rank in group]
    return position


def test_a_slow_last_node_placed_by_the_planner_runs_a_stage_other_than_the_last() -> None:
    # Given the planner's placement of 4 nodes x 8 GPUs, pp=4, tp=8, dp=1, with the last node 5% slow
    stage_nodes, per_node = _placed_slow_node(nodes=4, slow=3, pp=4)
    # (the slow node swaps with its nearest fast neighbour: node 3 runs stage 2, node 2 the last stage)
    assert stage_nodes == ((0,), (1,), (3,), (2,))
    # When the job turns it into its rank permutation and process groups
    to_physical, to_logical = runtime.rank_permutation(stage_nodes, gpus_per_node=per_node, tp=8, dp=1, pp=4)
    groups = runtime.process_group_ranks(to_physical, tp=8, dp=1, pp=4)
    slow_ranks = set(range(3 * per_node, 4 * per_node))
    # Then every rank of the slow node runs a stage before the last, and none is in a last-stage tp group
    assert {_stage_of(groups, rank) for rank in slow_ranks} == {2}
    assert all(_stage_of(groups, rank) < 3 for rank in slow_ranks)
    last_stage_tp = [group for group in groups["tp"] if _stage_of(groups, group[0]) == 3]
    assert last_stage_tp
    assert not slow_ranks & {rank for group in last_stage_tp for rank in group}
    # And its tp group is still its own node's 8 GPUs, in local order (tp stays on NVLink)
    assert sorted(slow_ranks) in groups["tp"]
    # And the permutation and its inverse undo each other, over every rank once
    assert sorted(to_physical) == list(range(32))
    assert [to_logical[to_physical[r]] for r in range(32)] == list(range(32))


def test_two_nodes_per_stage_the_slow_node_moves_with_its_whole_dp_share() -> None:
    # Given 8 nodes x 8 GPUs, pp=4, tp=8, dp=2 (two nodes per stage), node 7 (last stage) 5% slow
    stage_nodes, per_node = _placed_slow_node(nodes=8, slow=7, pp=4)
    # When the job builds its groups
    to_physical, _ = runtime.rank_permutation(stage_nodes, gpus_per_node=per_node, tp=8, dp=2, pp=4)
    groups = runtime.process_group_ranks(to_physical, tp=8, dp=2, pp=4)
    # Then node 7's 8 ranks run one non-last stage; the last stage's 16 ranks are all on fast nodes
    assert {_stage_of(groups, rank) for rank in range(56, 64)} == {2}
    last = {rank for rank in range(64) if _stage_of(groups, rank) == 3}
    assert len(last) == 16
    assert not last & set(range(56, 64))
    # And every dp group pairs the same tp slot of the stage's two nodes; the groups partition the ranks
    for name, size in (("tp", 8), ("dp", 2), ("pp", 4)):
        flat = [rank for group in groups[name] for rank in group]
        assert sorted(flat) == list(range(64))
        assert {len(g) for g in groups[name]} == {size}
    assert all(a % 8 == b % 8 for a, b in groups["dp"])


@pytest.mark.parametrize("stage_nodes", [None, [], ()])
def test_null_stage_nodes_is_megatrons_rank_order(stage_nodes: Any) -> None:
    # Given no placement (all nodes nominal) for 2 nodes x 4 GPUs, tp=2, dp=2, pp=2
    # When the job builds its permutation and groups
    to_physical, to_logical = runtime.rank_permutation(stage_nodes, gpus_per_node=4, tp=2, dp=2, pp=2)
    groups = runtime.process_group_ranks(to_physical, tp=2, dp=2, pp=2)
    # Then ranks are unchanged and the groups are Megatron's: tp innermost, then dp, then pp
    assert to_physical == to_logical == tuple(range(8))
    assert groups == {
        "tp": [[0, 1], [2, 3], [4, 5], [6, 7]],
        "dp": [[0, 2], [1, 3], [4, 6], [5, 7]],
        "pp": [[0, 4], [1, 5], [2, 6], [3, 7]],
    }


def test_the_planners_rank_order_placement_is_the_identity() -> None:
    # Given stage_nodes in rank order (stage i on nodes i*2, i*2+1), as the planner writes for no move
    # When it is applied, Then nothing moves
    to_physical, _ = runtime.rank_permutation([[0, 1], [2, 3]], gpus_per_node=8, tp=8, dp=2, pp=2)
    assert to_physical == tuple(range(32))


def test_a_swap_moves_whole_nodes_and_keeps_local_slots() -> None:
    # Given 3 nodes of 2 GPUs, pp=3, tp=2 and node 2 moved to the first stage
    to_physical, to_logical = runtime.rank_permutation([[2], [1], [0]], gpus_per_node=2, tp=2, dp=1, pp=3)
    # Then logical rank r runs on node order[r // 2], same local slot; the inverse maps back
    assert to_physical == (4, 5, 2, 3, 0, 1)
    assert to_logical == (4, 5, 2, 3, 0, 1)
    groups = runtime.process_group_ranks(to_physical, tp=2, dp=1, pp=3)
    # And the pp groups run from the first stage (node 2) to the last (node 0): not ascending
    assert groups["pp"] == [[4, 2, 0], [5, 3, 1]]


@pytest.mark.parametrize(
    ("stage_nodes", "sizes", "message"),
    [
        ([[0], [1]], {"tp": 2, "dp": 1, "pp": 3, "gpus_per_node": 2}, "stage_nodes: must list one entry per pipeline stage (pp = 3), got 2"),
        ([[0, 0], [1, 2]], {"tp": 2, "dp": 2, "pp": 2, "gpus_per_node": 2}, "stage_nodes[0]: node 0 is already in stage_nodes[0]"),
        ([[0, 1], [1, 3]], {"tp": 2, "dp": 2, "pp": 2, "gpus_per_node": 2}, "stage_nodes[1]: node 1 is already in stage_nodes[0]"),
        ([[0], [4]], {"tp": 2, "dp": 1, "pp": 2, "gpus_per_node": 2}, "stage_nodes[1]: node indices are integers 0 to 1, got 4"),
        ([[0], [-1]], {"tp": 2, "dp": 1, "pp": 2, "gpus_per_node": 2}, "stage_nodes[1]: node indices are integers 0 to 1, got -1"),
        ([[True], [0]], {"tp": 2, "dp": 1, "pp": 2, "gpus_per_node": 2}, "stage_nodes[0]: node indices are integers"),
        ([["1"], [0]], {"tp": 2, "dp": 1, "pp": 2, "gpus_per_node": 2}, "stage_nodes[0]: node indices are integers"),
        ([[0, 1, 2], [3]], {"tp": 2, "dp": 2, "pp": 2, "gpus_per_node": 2}, "stage_nodes[0]: must list 2 node(s)"),
        ([1, 0], {"tp": 2, "dp": 1, "pp": 2, "gpus_per_node": 2}, "stage_nodes[0]: must be a list of node indices, got 1"),
        ("10", {"tp": 2, "dp": 1, "pp": 2, "gpus_per_node": 2}, "stage_nodes: must be null or a list of 2 lists"),
        ([[0], [1]], {"tp": 2, "dp": 1, "pp": 2, "gpus_per_node": 4}, "stage_nodes: must be null when a stage (tp x dp = 2 GPUs)"),
        (None, {"tp": 3, "dp": 1, "pp": 1, "gpus_per_node": 2}, "gpus_per_node: must divide tp x dp x pp = 3"),
        (None, {"tp": 0, "dp": 1, "pp": 1, "gpus_per_node": 1}, "tp: must be a positive integer, got 0"),
        (None, {"tp": 1, "dp": 1, "pp": 1, "gpus_per_node": 0}, "gpus_per_node: must be a positive integer, got 0"),
    ],
)  # fmt: skip
def test_bad_stage_nodes_are_refused_naming_the_field(
    stage_nodes: Any, sizes: dict[str, Any], message: str
) -> None:
    # Given stage_nodes (or sizes) that cannot be applied, When the job computes its permutation
    # Then it raises a ValueError naming the field and what is allowed
    with pytest.raises(runtime.StageNodesError) as raised:
        runtime.rank_permutation(stage_nodes, **sizes)
    assert str(raised.value).startswith(message)
    assert isinstance(raised.value, ValueError)


def test_group_ranks_need_a_permutation_of_every_rank() -> None:
    # Given a rank list that is not a permutation of tp x dp x pp ranks, Then the groups are refused
    with pytest.raises(runtime.StageNodesError, match=r"^to_physical: must be a permutation of the 4 ranks"):
        runtime.process_group_ranks([0, 1, 1, 3], tp=2, dp=1, pp=2)
    with pytest.raises(runtime.StageNodesError, match=r"^to_physical: .* got 3 values"):
        runtime.process_group_ranks([0, 1, 2], tp=2, dp=1, pp=2)


def test_adjust_parallelism_keeps_the_record_behind_its_new_plan(tmp_path: Path) -> None:
    # Given a plan record with stage_nodes in OSPREY_PLAN_FILE
    record = {"version": "1", "job_id": "local#train", "plan_id": "p2", "tp": 2, "pp": 2, "dp": 1}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({**record, "micro_batch": 1, "virtual": 1, "stage_nodes": [[1], [0]]}))
    env = {"OSPREY_PLAN_FILE": str(plan_file), "OSPREY_INTERVAL": "10"}
    # When adjust_parallelism returns its plan
    plan = osprey.adjust_parallelism(10, {"tp": 1, "pp": 1, "dp": 4, "micro_batch": 2}, environ=env)
    # Then the record behind it holds the placement, and is a copy the caller cannot corrupt
    assert plan is not None
    assert plan.pp == 2
    kept = recommended_record()
    assert kept is not None
    assert kept["stage_nodes"] == [[1], [0]]
    assert kept["plan_id"] == "p2"
    kept["stage_nodes"].clear()
    assert (recommended_record() or {})["stage_nodes"] == [[1], [0]]


_WORKER = """
import json, sys
from pathlib import Path
import torch
import torch.distributed as dist
from osprey import runtime

dist.init_process_group("gloo")
rank = dist.get_rank()
to_physical, to_logical = runtime.rank_permutation([[1], [0]], gpus_per_node=2, tp=2, dp=1, pp=2)
groups = runtime.process_group_ranks(to_physical, tp=2, dp=1, pp=2)
mine = {}
for name in ("tp", "dp", "pp"):
    for ranks in groups[name]:
        group = dist.new_group(ranks)  # every process creates every group, in the same order
        if rank in ranks:
            mine[name] = (group, ranks)
stage_ranks = mine["pp"][1]
stage = stage_ranks.index(rank)
received = None
if stage == 0:
    dist.send(torch.tensor([float(rank)]), dst=stage_ranks[1])
else:
    value = torch.zeros(1)
    dist.recv(value, src=stage_ranks[0])
    received = int(value.item())
total = torch.tensor([float(rank)])
dist.all_reduce(total, group=mine["tp"][0])
result = {"stage": stage, "logical": to_logical[rank], "received_from": received, "tp_sum": int(total.item())}
Path(sys.argv[1], f"{rank}.json").write_text(json.dumps(result))
dist.destroy_process_group()
"""


def test_four_gloo_processes_keep_their_ranks_and_run_the_placed_stages(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    # Given 4 torchrun processes as 2 nodes of 2 (ranks 0-1 node 0, 2-3 node 1) and stage_nodes [[1], [0]]
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4"]
    # When each builds its tp, dp and pp groups from process_group_ranks with new_group
    result = subprocess.run(
        [*command, str(script), str(tmp_path)],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    seen = {rank: json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(4)}
    # Then node 1's ranks run the first stage and node 0's the last, under their own torchrun ranks
    assert {rank: seen[rank]["stage"] for rank in range(4)} == {0: 1, 1: 1, 2: 0, 3: 0}
    assert {rank: seen[rank]["logical"] for rank in range(4)} == {0: 2, 1: 3, 2: 0, 3: 1}
    # And activations flow from the first stage to the last along the pp lists (node 1 -> node 0)
    assert seen[0]["received_from"] == 2
    assert seen[1]["received_from"] == 3
    # And each tp group is one node's two ranks (0 + 1 on node 0, 2 + 3 on node 1)
    assert {rank: seen[rank]["tp_sum"] for rank in range(4)} == {0: 1, 1: 1, 2: 5, 3: 5}
