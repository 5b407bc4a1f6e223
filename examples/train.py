"""A tiny transformer language model trained with tensor x data parallelism that re-shapes itself when
Osprey recommends another plan.

Run on CPU with four processes (gloo)::

    OSPREY_INTERVAL=10 OSPREY_PLAN_FILE=plan.json OSPREY_LOG=trace.jsonl \\
        torchrun --nproc-per-node 4 examples/train.py --steps 40 --tp 1 --micro-batch 2

Every ``OSPREY_INTERVAL`` steps rank 0 calls ``osprey.adjust_parallelism(step, current)`` and broadcasts the
answer. On a new plan every rank saves a ``torch.distributed.checkpoint`` (model and optimizer, sharded as
they are), builds a new ``DeviceMesh`` of shape (dp, tp), re-applies tensor parallelism to a fresh model and
loads the checkpoint into it (DCP re-shards), then carries on from the same step with the plan's
micro-batch. Rank 0 appends ``{"event": "reshape" | "skipped" | "done", ...}`` lines to ``OSPREY_LOG``
next to adjust_parallelism's own decisions.

Tensor parallelism is Megatron's: attention QKV and MLP up-projection column-parallel, the output
projections row-parallel (``torch.distributed.tensor.parallel``); data parallelism all-reduces gradients
over the mesh's ``dp`` dimension. Pipeline parallelism is not implemented here: a plan with ``pp > 1`` is
logged as skipped and training continues on the current plan.
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
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import osprey
from osprey_control.planner import interval_from_env

VOCAB = 64
SEQ = 32
HIDDEN = 64
HEADS = 4
LAYERS = 2
GLOBAL_BATCH = 16


@dataclass(frozen=True)
class Shape:
    tp: int
    dp: int
    micro_batch: int

    def plan(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": 1, "dp": self.dp, "micro_batch": self.micro_batch, "virtual": 1}


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        qkv = self.qkv(x)
        # Under tensor parallelism this rank holds HEADS/tp heads: derive the count from the local width.
        heads = qkv.shape[-1] // (3 * (HIDDEN // HEADS))
        q, k, v = qkv.view(batch, seq, heads, 3, HIDDEN // HEADS).unbind(dim=3)
        out = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return self.proj(out.transpose(1, 2).reshape(batch, seq, -1))  # type: ignore[no-any-return]


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(HIDDEN)
        self.attn = Attention()
        self.ln2 = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc2 = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))  # type: ignore[no-any-return]


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))  # type: ignore[no-any-return]


def build(shape: Shape) -> tuple[DeviceMesh, nn.Module, torch.optim.Optimizer]:
    """A mesh of (dp, tp), a fresh model with tensor parallelism on its tp sub-mesh, and its optimizer."""
    mesh = init_device_mesh("cpu", (shape.dp, shape.tp), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = TinyLM()
    if shape.tp > 1:
        for block in model.blocks:
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
    return mesh, model, optimizer


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of ``step``: sequences counting up by a per-sample stride (learnable next tokens)."""
    generator = torch.Generator().manual_seed(step)
    start = torch.randint(0, VOCAB, (GLOBAL_BATCH, 1), generator=generator)
    stride = torch.randint(1, 4, (GLOBAL_BATCH, 1), generator=generator)
    tokens = (start + stride * torch.arange(SEQ + 1)) % VOCAB
    return tokens[:, :-1], tokens[:, 1:]


def train_step(step: int, shape: Shape, mesh: DeviceMesh, model: nn.Module, optimizer: Any) -> float:
    """One step of the global batch: this dp rank's share in micro-batches, gradients averaged over dp."""
    inputs, targets = batch(step)
    share = GLOBAL_BATCH // shape.dp
    rank = mesh["dp"].get_local_rank()
    inputs, targets = inputs[rank * share : (rank + 1) * share], targets[rank * share : (rank + 1) * share]
    optimizer.zero_grad()
    total = 0.0
    for begin in range(0, share, shape.micro_batch):
        logits = model(inputs[begin : begin + shape.micro_batch])
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB), targets[begin : begin + shape.micro_batch].reshape(-1)
        )
        (loss * shape.micro_batch / share).backward()  # type: ignore[no-untyped-call]
        total += loss.item() * shape.micro_batch / share
    group = mesh["dp"].get_group()
    for parameter in model.parameters():
        if parameter.grad is None:
            continue
        grad = parameter.grad.to_local() if isinstance(parameter.grad, DTensor) else parameter.grad
        dist.all_reduce(grad, group=group)
        grad /= shape.dp
    optimizer.step()
    loss_tensor = torch.tensor([total])
    dist.all_reduce(loss_tensor, group=group)
    return float(loss_tensor.item()) / shape.dp


@torch.no_grad()
def eval_loss(model: nn.Module) -> float:
    inputs, targets = batch(10_000)
    logits = model(inputs)
    return float(nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1)).item())


def reshape(
    shape: Shape, new: Shape, model: nn.Module, optimizer: Any, checkpoint: Path
) -> tuple[DeviceMesh, nn.Module, Any]:
    """Save (sharded as now), rebuild the mesh and the model for ``new``, load (DCP re-shards)."""
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp_save({"model": model_state, "optim": optim_state}, checkpoint_id=str(checkpoint))
    mesh, model, optimizer = build(new)
    model_state, optim_state = get_state_dict(model, optimizer)
    # DCP loads in place into the new, differently sharded tensors of these state dicts.
    dcp_load({"model": model_state, "optim": optim_state}, checkpoint_id=str(checkpoint))
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state)
    return mesh, model, optimizer


def log_event(event: dict[str, Any]) -> None:
    line = json.dumps({"time": time.time(), **event}, sort_keys=True)
    print(line, flush=True)
    path = os.environ.get("OSPREY_LOG")
    if path:
        with Path(path).open("a") as handle:
            handle.write(line + "\n")


def recommended(step: int, shape: Shape) -> Shape | None:
    """Rank 0 asks Osprey; every rank gets the same answer (or None) by broadcast."""
    answer: list[Any] = [None]
    if dist.get_rank() == 0:
        plan = osprey.adjust_parallelism(step, shape.plan())
        answer[0] = plan.to_dict() if plan is not None else None
    dist.broadcast_object_list(answer, src=0)
    plan = answer[0]
    if plan is None:
        return None
    reason = None
    if plan["pp"] != 1 or plan["virtual"] != 1:
        reason = "pipeline parallelism is not implemented in this example"
    elif (
        HEADS % plan["tp"] or (GLOBAL_BATCH // plan["dp"]) % plan["micro_batch"] or GLOBAL_BATCH % plan["dp"]
    ):
        reason = f"tp must divide {HEADS} heads and dp*micro_batch the global batch {GLOBAL_BATCH}"
    if reason:
        if dist.get_rank() == 0:
            log_event({"event": "skipped", "step": step, "plan": plan, "reason": reason})
        return None
    return Shape(tp=plan["tp"], dp=plan["dp"], micro_batch=plan["micro_batch"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--checkpoint-dir", type=Path, default=None)
    args = parser.parse_args(argv)

    dist.init_process_group("gloo")
    world = dist.get_world_size()
    interval = interval_from_env()
    shape = Shape(tp=args.tp, dp=world // args.tp, micro_batch=args.micro_batch)
    mesh, model, optimizer = build(shape)
    root = (
        args.checkpoint_dir
        or Path(tempfile.gettempdir()) / f"osprey-train-{os.environ.get('TORCHELASTIC_RUN_ID', 'local')}"
    )
    first = last = math.nan
    try:
        for step in range(args.steps):
            if step and step % interval == 0:
                new = recommended(step, shape)
                if new is not None and new != shape:
                    before = eval_loss(model)
                    checkpoint = root / f"step-{step}"
                    mesh, model, optimizer = reshape(shape, new, model, optimizer, checkpoint)
                    after = eval_loss(model)
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
                            }
                        )
                    shape = new
            last = train_step(step, shape, mesh, model, optimizer)
            first = last if step == 0 else first
        if dist.get_rank() == 0:
            log_event(
                {
                    "event": "done",
                    "steps": args.steps,
                    "plan": shape.plan(),
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
