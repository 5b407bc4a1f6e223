"""Given examples/train.py under torchrun as two nodes of 2 CPU processes (gloo; two torchrun agents on this
host with static rendezvous, node ranks 0 and 1) and a new plan in OSPREY_PLAN_FILE whose stage_nodes put
node 1 on the first stage and node 0 on the last, when it reaches an OSPREY_INTERVAL step, then
adjust_parallelism returns the plan, the job saves a torch.distributed.checkpoint, rebuilds its device mesh
from (pp, dp, tp) = (1, 4, 1) to (2, 1, 2) on the nodes in that order (same torchrun ranks), reloads with the
same weights (re-sharded across tp, re-split across pipeline stages) and keeps training; the OSPREY_LOG trace
shows all of it.

Runs in CI (~40-60 s on two cores); no timing is asserted."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "examples" / "train.py"
METRICS = [
    "InterconnectLatencyMicroseconds",
    "RemainingSeconds",
    "StepTimeSeconds",
    "SlowestNodeSpeed",
    "SlowestNodeIndex",
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(tmp_path: Path, plan: dict[str, Any], steps: int = 30) -> tuple[list[dict[str, Any]], str]:
    plan_file, trace = tmp_path / "plan.json", tmp_path / "trace.jsonl"
    plan_file.write_text(json.dumps({"version": "1", "job_id": "local#train", "plan_id": "p1", **plan}))
    env = {
        **os.environ,
        "OSPREY_INTERVAL": "10",
        "OSPREY_PLAN_FILE": str(plan_file),
        "OSPREY_LOG": str(trace),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("OSPREY_TABLE_NAME", None)
    port = str(_free_port())
    agents = [
        subprocess.Popen(
            [
                sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
                "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", port,
                str(TRAIN), "--steps", str(steps), "--tp", "1", "--micro-batch", "2",
                "--checkpoint-dir", str(tmp_path / "checkpoints"),
            ],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for node in (0, 1)
    ]  # fmt: skip
    outputs = []
    try:
        for agent in agents:
            stdout, stderr = agent.communicate(timeout=240)
            outputs.append(stdout)
            assert agent.returncode == 0, stdout[-3000:] + stderr[-3000:]
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
    return [json.loads(line) for line in trace.read_text().splitlines()], "".join(outputs)


def test_train_reshapes_its_mesh_on_a_new_plan_and_keeps_training(tmp_path: Path) -> None:
    # Given a job on 2 nodes started as tp=1 x pp=1 x dp=4 (micro-batch 2) and a recommendation of
    # tp=2 x pp=2 x dp=1 that places node 1 (say, 5% slow; in rank order it would run the last stage) on the
    # first stage and node 0 on the last
    new = {"tp": 2, "pp": 2, "dp": 1, "micro_batch": 1, "virtual": 1}
    trace, stdout = _run(tmp_path, {**new, "stage_nodes": [[1], [0]]})
    decisions = [(e["step"], e["decision"]) for e in trace if "decision" in e]
    events = [e for e in trace if "event" in e]
    # Then adjust_parallelism decided at steps 10 and 20: the new plan first, unchanged after the re-shape
    assert decisions == [(10, "new-plan"), (20, "unchanged")]
    # And the job re-shaped at step 10 through a DCP checkpoint, with identical weights after reloading
    (reshape,) = [e for e in events if e["event"] == "reshape"]
    assert reshape["step"] == 10
    assert reshape["from"] == {"tp": 1, "pp": 1, "dp": 4, "micro_batch": 2, "virtual": 1}
    assert reshape["to"] == new
    assert (Path(reshape["checkpoint"]) / ".metadata").is_file()
    assert reshape["eval_loss_after"] == pytest.approx(reshape["eval_loss_before"], rel=1e-4)
    # And the new mesh runs Megatron's layout on the nodes re-ordered: node 1's ranks (2, 3) the first stage,
    # node 0's ranks (0, 1) the last, logged once with the re-shape
    assert reshape["stage_nodes"] == [[1], [0]]
    assert reshape["stage_ranks"] == [[2, 3], [0, 1]]
    # And training continued to the last step on the new plan, still learning
    (done,) = [e for e in events if e["event"] == "done"]
    assert done["steps"] == 30
    assert done["plan"] == new
    assert done["last_loss"] < 0.5 * done["first_loss"]
    # And rank 0, on node 0, ran the last stage (the output head) after the re-shape
    assert done["rank0_stage"] == 1
    # And at each decision point (steps 10 and 20) the lead process alone printed one EMF line per metric:
    # what the plan step measures (latency, step time, the slowest node's speed from every rank's step time) and
    # the priority's remaining time; the 3 others none
    emf = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"_aws"')]
    names = [name for line in emf for name in line if name in METRICS]
    assert sorted(names) == sorted(METRICS * 2)
    assert len({line["Host"] for line in emf}) == 1
    assert [line["RemainingSeconds"] for line in emf if "RemainingSeconds" in line][-1] > 0
    # (two nodes of 2 ranks here: either may be the slower, and its speed is at most 1)
    speeds = [line["SlowestNodeSpeed"] for line in emf if "SlowestNodeSpeed" in line]
    assert {line["SlowestNodeIndex"] for line in emf if "SlowestNodeIndex" in line} <= {0, 1}
    assert all(0 < speed <= 1 for speed in speeds)
