"""Given examples/train.py under torchrun with 4 CPU processes (gloo) and a new plan in OSPREY_PLAN_FILE,
when it reaches an OSPREY_INTERVAL step, then adjust_parallelism returns the plan, the job saves a
torch.distributed.checkpoint, rebuilds its device mesh from (pp, dp, tp) = (1, 4, 1) to (2, 1, 2), reloads
with the same weights (re-sharded across tp, re-split across pipeline stages) and keeps training; the
OSPREY_LOG trace shows all of it.

Runs in CI (~30-60 s on two cores); no timing is asserted."""

from __future__ import annotations

import json
import os
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
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
        str(TRAIN), "--steps", str(steps), "--tp", "1", "--micro-batch", "2",
        "--checkpoint-dir", str(tmp_path / "checkpoints"),
    ]  # fmt: skip
    result = subprocess.run(
        command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(line) for line in trace.read_text().splitlines()], result.stdout


def test_train_reshapes_its_mesh_on_a_new_plan_and_keeps_training(tmp_path: Path) -> None:
    # Given a job started as tp=1 x pp=1 x dp=4 (micro-batch 2) and a recommendation of tp=2 x pp=2 x dp=1
    new = {"tp": 2, "pp": 2, "dp": 1, "micro_batch": 1, "virtual": 1}
    trace, stdout = _run(tmp_path, new)
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
    # And training continued to the last step on the new plan, still learning
    (done,) = [e for e in events if e["event"] == "done"]
    assert done["steps"] == 30
    assert done["plan"] == new
    assert done["last_loss"] < 0.5 * done["first_loss"]
    # And at each decision point (steps 10 and 20) the lead process alone printed one EMF line per metric:
    # what the plan step measures (latency, step time, the slowest node's speed from every rank's step time) and
    # the priority's remaining time; the 3 others none
    emf = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"_aws"')]
    names = [name for line in emf for name in line if name in METRICS]
    assert sorted(names) == sorted(METRICS * 2)
    assert len({line["Host"] for line in emf}) == 1
    assert [line["RemainingSeconds"] for line in emf if "RemainingSeconds" in line][-1] > 0
    # (one node of 4 ranks here: it is the slowest, and its speed is at most 1)
    speeds = [line["SlowestNodeSpeed"] for line in emf if "SlowestNodeSpeed" in line]
    assert [line["SlowestNodeIndex"] for line in emf if "SlowestNodeIndex" in line] == [0, 0]
    assert all(0 < speed <= 1 for speed in speeds)
