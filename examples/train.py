"""A tiny transformer language model (``tiny_lm.py``) trained with tensor x pipeline x data parallelism that
re-shapes itself when Osprey recommends another plan.

Run on CPU with four processes (gloo)::

    OSPREY_INTERVAL=10 OSPREY_PLAN_FILE=plan.json OSPREY_LOG=trace.jsonl \\
        torchrun --standalone --nproc-per-node 4 examples/train.py --steps 30 --tp 1 --pp 1 --micro-batch 2

Every ``OSPREY_INTERVAL`` steps every rank reports what the plan step measures (``osprey.runtime``: the
interconnect latency of a tiny all-reduce and the mean step time since the previous decision point) and the
remaining time for the priority (``report_progress``), and every rank's step time for the slowest node's speed
(``report_node_speeds``, and every node's speed to ``adjust_parallelism``); only the lead process prints them, one CloudWatch EMF
series per metric per job. Then rank 0 calls ``osprey.adjust_parallelism(step, current)`` and broadcasts the
answer. On a new plan every rank saves a ``torch.distributed.checkpoint`` (model and optimizer, sharded as
they are), builds a new ``DeviceMesh`` of shape (pp, dp, tp), builds its pipeline stage of a fresh model with
tensor parallelism and loads the checkpoint into it (DCP re-shards across tp and re-splits the layers across
pp), then carries on from the same step with the plan's micro-batch, on the nodes in the order of the record's
``stage_nodes`` when it has them (straggler placement, ``osprey.runtime.rank_permutation``). Rank 0 appends
``{"event": "reshape" | "skipped" | "done", ...}`` lines to ``OSPREY_LOG`` next to adjust_parallelism's own
decisions.

Tensor parallelism is Megatron's: attention QKV and MLP up-projection column-parallel, the output
projections row-parallel (``torch.distributed.tensor.parallel``). The pipeline is GPipe with blocking
point-to-point sends (all forwards, then all backwards), with no interleaved schedule: register the job with
``max_virtual=1`` (``osprey.request_planning(..., max_virtual=1)``) and the plan step recommends none; a record
that still asks for ``virtual > 1`` is logged as skipped and training continues on the current plan. Data
parallelism all-reduces gradients over the mesh's ``dp`` dimension.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tiny_lm import HEADS, HIDDEN, LAYERS, SEQ, VOCAB, Stage
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import osprey
from osprey import runtime
from osprey.parallelism import recommended_record
from osprey.planning import node_speeds
from osprey_control.planner import interval_from_env

GLOBAL_BATCH = 16


@dataclass(frozen=True)
class Shape:
    tp: int
    pp: int
    dp: int
    micro_batch: int

    def plan(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "micro_batch": self.micro_batch, "virtual": 1}


@dataclass
class Job:
    """This rank's view of one plan: the (pp, dp, tp) mesh, its stage of the model and the optimizer."""

    shape: Shape
    mesh: DeviceMesh
    model: Stage
    optimizer: torch.optim.Optimizer

    @property
    def coordinate(self) -> list[int]:
        coordinate = self.mesh.get_coordinate()
        assert coordinate is not None
        return list(coordinate)

    def peer(self, stage_offset: int) -> int:
        p, d, t = self.coordinate
        return int(self.mesh.mesh[p + stage_offset, d, t].item())


def gpus_per_node() -> int:
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def build(shape: Shape, stage_nodes: list[list[int]] | None = None) -> Job:
    """A (pp, dp, tp) mesh on the nodes in ``stage_nodes`` order (rank order when None), this rank's stage
    with tensor parallelism on its tp sub-mesh, and its optimizer."""
    order, _ = runtime.rank_permutation(
        stage_nodes, gpus_per_node=gpus_per_node(), tp=shape.tp, dp=shape.dp, pp=shape.pp
    )
    layout = torch.tensor(order).view(shape.pp, shape.dp, shape.tp)
    mesh = DeviceMesh("cpu", layout, mesh_dim_names=("pp", "dp", "tp"))
    coordinate = mesh.get_coordinate()
    assert coordinate is not None
    model = Stage(coordinate[0], shape.pp)
    if shape.tp > 1:
        for block in model.blocks.values():
            parallelize_module(
                block,
                mesh["tp"],
                {
                    "attn.qkv": ColwiseParallel(),
                    "attn.proj": RowwiseParallel(),
                    "fc1": ColwiseParallel(),
                    "fc2": RowwiseParallel(),
                },
            )
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=False)
    return Job(shape, mesh, model, optimizer)


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of ``step``: sequences counting up by a per-sample stride (learnable next tokens)."""
    generator = torch.Generator().manual_seed(step)
    start = torch.randint(0, VOCAB, (GLOBAL_BATCH, 1), generator=generator)
    stride = torch.randint(1, 4, (GLOBAL_BATCH, 1), generator=generator)
    tokens = (start + stride * torch.arange(SEQ + 1)) % VOCAB
    return tokens[:, :-1], tokens[:, 1:]


def pipeline(job: Job, inputs: torch.Tensor, targets: torch.Tensor, micro_batch: int, train: bool) -> float:
    """GPipe over this rank's stage: every micro-batch forward (activations sent to the next stage), then
    backward in reverse (gradients sent back). Returns the mean loss on the last stage, 0 elsewhere."""
    model, first, last = job.model, job.model.first, job.model.last
    count = inputs.shape[0] // micro_batch
    received: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []
    total = 0.0
    for k in range(count):
        rows = slice(k * micro_batch, (k + 1) * micro_batch)
        if first:
            x = inputs[rows]
        else:
            x = torch.empty(micro_batch, SEQ, HIDDEN)
            dist.recv(x, src=job.peer(-1))
            x.requires_grad_(train)
        y = model(x)
        if last:
            y = nn.functional.cross_entropy(y.reshape(-1, VOCAB), targets[rows].reshape(-1)) / count
            total += float(y.item())
        else:
            dist.send(y.detach().contiguous(), dst=job.peer(1))
        received.append(x)
        outputs.append(y)
    if train:
        for k in reversed(range(count)):
            if last:
                outputs[k].backward()  # type: ignore[no-untyped-call]
            else:
                grad = torch.empty(micro_batch, SEQ, HIDDEN)
                dist.recv(grad, src=job.peer(1))
                outputs[k].backward(grad)  # type: ignore[no-untyped-call]
            if not first:
                dist.send(received[k].grad.contiguous(), dst=job.peer(-1))  # type: ignore[union-attr]
    return total


def _from_last_stage(job: Job, value: float, replicas: int) -> float:
    """Sum ``value`` over the last stage's dp replicas (tp rank 0 only), divided by ``replicas``, on every rank."""
    p, _, t = job.coordinate
    mine = value if p == job.shape.pp - 1 and t == 0 else 0.0
    tensor = torch.tensor([mine])
    dist.all_reduce(tensor)
    return float(tensor.item()) / replicas


def train_step(step: int, job: Job) -> float:
    """One step of the global batch: this dp rank's share through the pipeline, gradients averaged over dp."""
    shape = job.shape
    inputs, targets = batch(step)
    share = GLOBAL_BATCH // shape.dp
    rank = job.coordinate[1]  # not the dp group's rank: new_group sorts ranks, placement may not
    rows = slice(rank * share, (rank + 1) * share)
    job.optimizer.zero_grad()
    loss = pipeline(job, inputs[rows], targets[rows], shape.micro_batch, train=True)
    group = job.mesh["dp"].get_group()
    for parameter in job.model.parameters():
        if parameter.grad is None:
            continue
        grad = parameter.grad.to_local() if isinstance(parameter.grad, DTensor) else parameter.grad
        dist.all_reduce(grad, group=group)
        grad /= shape.dp
    job.optimizer.step()
    return _from_last_stage(job, loss, shape.dp)


@torch.no_grad()
def eval_loss(job: Job) -> float:
    """Loss of a fixed held-out batch, every replica the whole batch: the same on every plan for equal weights."""
    inputs, targets = batch(10_000)
    loss = pipeline(job, inputs, targets, GLOBAL_BATCH, train=False)
    return _from_last_stage(job, loss, job.shape.dp)


def reshape(job: Job, new: Shape, checkpoint: Path, stage_nodes: list[list[int]] | None) -> Job:
    """Save (sharded as now), rebuild the mesh and the model for ``new`` on the nodes in ``stage_nodes``
    order, load (DCP re-shards and moves each stage's weights to the ranks that now run it)."""
    model_state, optim_state = get_state_dict(job.model, job.optimizer)
    dcp_save({"model": model_state, "optim": optim_state}, checkpoint_id=str(checkpoint))
    job = build(new, stage_nodes)
    model_state, optim_state = get_state_dict(job.model, job.optimizer)
    # DCP loads in place into the new, differently sharded tensors of these state dicts (this stage's keys).
    dcp_load({"model": model_state, "optim": optim_state}, checkpoint_id=str(checkpoint))
    set_state_dict(job.model, job.optimizer, model_state_dict=model_state, optim_state_dict=optim_state)
    return job


def log_event(event: dict[str, Any]) -> None:
    line = json.dumps({"time": time.time(), **event}, sort_keys=True)
    print(line, flush=True)
    path = os.environ.get("OSPREY_LOG")
    if path:
        with Path(path).open("a") as handle:
            handle.write(line + "\n")


def report_metrics(step: int, total_steps: int, since: tuple[int, float]) -> list[float] | None:
    """What the plan step re-plans from and the priority's remaining time, as EMF lines on the lead process.

    ``since``: the (step, ``time.perf_counter()``) the step time is measured from. Every rank calls it: the
    latency is a collective, and each report decides for itself whether this process is the lead.
    """
    first, started = since
    step_time = (time.perf_counter() - started) / (step - first) if step > first else None
    if step_time is not None:
        runtime.report_step_time(step_time)
    latency = runtime.measure_interconnect_latency()
    if latency is not None:
        runtime.report_interconnect_latency(latency)
    # The same step time for the remaining time (without it, the runtime measures between its own calls).
    runtime.report_progress(step, total_steps, step_time)
    # Each rank's step time, gathered: the lead reports the slowest node's speed, which the plan step uses to keep
    # a straggler off the critical pipeline stage. (A real job would time its compute alone, without the
    # collectives' waits; this example's steps are mostly compute.)
    # Every node's speed also goes to adjust_parallelism, so the plan step sees each slow node, not only the slowest.
    if step_time is None:
        return None
    times = runtime.gather_compute_times(step_time)
    if not times:
        return None
    runtime.report_node_speeds(times, gpus_per_node())
    return node_speeds(times, gpus_per_node())


def recommended(
    step: int, shape: Shape, running: list[list[int]] | None, speeds: list[float] | None = None
) -> tuple[Shape, list[list[int]] | None] | None:
    """Rank 0 asks Osprey (telling it the node order the job runs, ``running``); every rank gets the same
    answer (or None) by broadcast: the plan and its stages' node order (None: rank order)."""
    answer: list[Any] = [None, None]
    if dist.get_rank() == 0:
        plan = osprey.adjust_parallelism(step, shape.plan(), stage_nodes=running, node_speeds=speeds)
        answer[0] = plan.to_dict() if plan is not None else None
        answer[1] = (recommended_record() or {}).get("stage_nodes") if plan else None
    dist.broadcast_object_list(answer, src=0)
    plan, stage_nodes = answer
    if plan is None:
        return None
    reason = None
    if plan["virtual"] != 1:
        reason = "interleaved pipelines (virtual > 1) are not implemented in this example"
    elif LAYERS % plan["pp"] or HEADS % plan["tp"]:
        reason = f"pp must divide the {LAYERS} layers and tp the {HEADS} heads"
    elif GLOBAL_BATCH % plan["dp"] or (GLOBAL_BATCH // plan["dp"]) % plan["micro_batch"]:
        reason = f"dp * micro_batch must divide the global batch {GLOBAL_BATCH}"
    if reason:
        if dist.get_rank() == 0:
            log_event({"event": "skipped", "step": step, "plan": plan, "reason": reason})
        return None
    new = Shape(tp=plan["tp"], pp=plan["pp"], dp=plan["dp"], micro_batch=plan["micro_batch"])
    try:
        runtime.rank_permutation(stage_nodes, gpus_per_node=gpus_per_node(), tp=new.tp, dp=new.dp, pp=new.pp)
    except runtime.StageNodesError as error:  # the placement is advice: the plan stands, in rank order
        if dist.get_rank() == 0:
            log_event({"event": "placement-ignored", "step": step, "reason": str(error)})
        stage_nodes = None
    return new, stage_nodes or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--pp", type=int, default=1)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--checkpoint-dir", type=Path, default=None)
    args = parser.parse_args(argv)

    dist.init_process_group("gloo")
    world = dist.get_world_size()
    interval = interval_from_env()
    shape = Shape(tp=args.tp, pp=args.pp, dp=world // (args.tp * args.pp), micro_batch=args.micro_batch)
    job = build(shape)
    root = (
        args.checkpoint_dir
        or Path(tempfile.gettempdir()) / f"osprey-train-{os.environ.get('TORCHELASTIC_RUN_ID', 'local')}"
    )
    first = last = math.nan
    running: list[list[int]] | None = None  # the node order applied (None: rank order)
    since = (0, time.perf_counter())
    try:
        for step in range(args.steps):
            if step and step % interval == 0:
                speeds = report_metrics(step, args.steps, since)
                answer = recommended(step, shape, running, speeds)
                new, stage_nodes = answer if answer is not None else (shape, running)
                # A new plan, or the same one with a straggler moved (a placement-only switch).
                if new != shape or stage_nodes != running:
                    before = eval_loss(job)
                    checkpoint = root / f"step-{step}"
                    job = reshape(job, new, checkpoint, stage_nodes)
                    after = eval_loss(job)
                    if dist.get_rank() == 0:
                        log_event(
                            {
                                "event": "reshape",
                                "step": step,
                                "from": shape.plan(),
                                "to": new.plan(),
                                "checkpoint": str(checkpoint),
                                "eval_loss_before": before,
                                "eval_loss_after": after,
                                # The re-ordering, once: the global ranks of each stage, first to last.
                                "stage_nodes": stage_nodes,
                                "stage_ranks": job.mesh.mesh.reshape(new.pp, -1).tolist(),
                            }
                        )
                    shape, running = new, stage_nodes
                # Measured afresh from here: the re-shape and the reports are not training steps.
                since = (step, time.perf_counter())
            last = train_step(step, job)
            first = last if step == 0 else first
        if dist.get_rank() == 0:
            log_event(
                {
                    "event": "done",
                    "steps": args.steps,
                    "plan": shape.plan(),
                    "rank0_stage": job.coordinate[0],
                    "first_loss": first,
                    "last_loss": last,
                }
            )
    finally:
        dist.barrier()
        if dist.get_rank() == 0 and args.checkpoint_dir is None:
            shutil.rmtree(root, ignore_errors=True)
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
