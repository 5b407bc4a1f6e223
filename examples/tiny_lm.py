"""The tiny transformer language model of ``examples/train.py``: one pipeline stage of it at a time.

Kept apart from the training loop so that the loop (parallelism, re-shape, Osprey calls) reads on its own.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["HEADS", "HIDDEN", "LAYERS", "SEQ", "VOCAB", "Stage"]

VOCAB = 64
SEQ = 32
HIDDEN = 64
HEADS = 4
LAYERS = 4


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


class Stage(nn.Module):
    """Pipeline stage ``index`` of ``stages``: its contiguous blocks, the embedding on the first stage, the
    final norm and output head on the last. Blocks keep their global index as name (``blocks.3``), so
    checkpoint keys are the same whatever the pipeline depth and DCP can re-split them."""

    def __init__(self, index: int, stages: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first, self.last = index == 0, index == stages - 1
        every = [Block() for _ in range(LAYERS)]  # same initial weights on every stage layout
        per_stage = LAYERS // stages
        mine = range(index * per_stage, (index + 1) * per_stage)
        self.blocks = nn.ModuleDict({str(i): every[i] for i in mine})
        torch.manual_seed(1)
        embed, ln, head = nn.Embedding(VOCAB, HIDDEN), nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, VOCAB)
        self.embed = embed if self.first else None
        self.ln = ln if self.last else None
        self.head = head if self.last else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            x = self.embed(x)
        for block in self.blocks.values():
            x = block(x)
        if self.ln is not None and self.head is not None:
            x = self.head(self.ln(x))
        return x
