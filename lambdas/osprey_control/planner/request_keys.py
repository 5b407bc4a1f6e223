"""The planner keys a job's plan request stores (its ``config``), by section, and how a job's inputs become
them: ``model`` (a :class:`ModelSpec` or a mapping), ``cluster`` (a mapping) and the search space the job's
training code supports (``max_virtual``). Every problem names its field as the caller spelled it
(``model.layers``, ``cluster.instance_type``). Pure Python, no AWS import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from osprey_control.planner.config import normalise_keys
from osprey_control.planner.model import ModelSpec

__all__: list[str] = []

MODEL_KEYS = (
    "layers",
    "hidden",
    "heads",
    "seq",
    "vocab",
    "global-batch",
    "recompute",
    "precision",
    "optimizer-sharding",
    "sequence-parallel",
    "flash-attention",
    "comm-overlap",
    "tied-embeddings",
    "ffn-hidden",
    "kv-heads",
    "gated-mlp",
)
CLUSTER_KEYS = (
    "gpus",
    "gpus-per-node",
    "instance-type",
    "gpu",
    "peak-tflops",
    "peak-tflops-fp8",
    "gpu-memory-gib",
    "hbm-gbytes",
    "nvlink-gbytes",
    "network-gbits",
    "memory-headroom",
)
# What the job's own training code can run: the plan step searches no further.
SEARCH_KEYS = ("max-virtual",)


@dataclass(frozen=True, slots=True)
class RequestProblem:
    """One bad input: ``field`` as the caller spelled it (``model.layers``), ``message`` what is allowed."""

    field: str
    message: str


def _switch(value: bool) -> str:
    return "on" if value else "off"


def model_values(model: ModelSpec | Mapping[str, Any], errors: list[RequestProblem]) -> dict[str, Any]:
    """The planner keys of ``model`` (a :class:`ModelSpec` or a mapping of :data:`MODEL_KEYS`); problems go
    to ``errors`` by field."""
    if isinstance(model, ModelSpec):
        if not model.fp32_grad_accumulation:
            errors.append(
                RequestProblem("model.fp32_grad_accumulation", "only the default (True) can be requested")
            )
        return {
            "layers": model.layers,
            "hidden": model.hidden,
            "heads": model.heads,
            "seq": model.seq,
            "vocab": model.vocab,
            "global-batch": model.global_batch,
            "recompute": model.recompute.value,
            "precision": model.precision.value,
            "optimizer-sharding": model.optimizer_sharding.value,
            **(
                {}
                if model.sequence_parallel is None
                else {"sequence-parallel": _switch(model.sequence_parallel)}
            ),
            "flash-attention": _switch(model.flash_attention),
            "comm-overlap": _switch(model.comm_overlap),
            "tied-embeddings": _switch(model.tied_embeddings),
            **({} if model.ffn_hidden is None else {"ffn-hidden": model.ffn_hidden}),
            **({} if model.kv_heads is None else {"kv-heads": model.kv_heads}),
            "gated-mlp": _switch(model.gated_mlp),
        }
    return section("model", model, MODEL_KEYS, errors)


def section(name: str, values: Any, allowed: tuple[str, ...], errors: list[RequestProblem]) -> dict[str, Any]:
    names = ", ".join(key.replace("-", "_") for key in allowed)
    if not isinstance(values, Mapping):
        errors.append(RequestProblem(name, f"must be a mapping of {names}"))
        return {}
    flat, problems = normalise_keys(values)
    for problem in problems:
        unknown = problem.message.startswith("unknown key")
        message = f"unknown key; allowed: {names}" if unknown else problem.message
        errors.append(RequestProblem(f"{name}.{problem.key}", message))
    for key in list(flat):
        if key not in allowed:
            errors.append(
                RequestProblem(f"{name}.{key.replace('-', '_')}", f"not a {name} key; allowed: {names}")
            )
            del flat[key]
    return flat


def field_of(key: str) -> str:
    """The caller's field for a planner key: ``model.layers``, ``cluster.gpus``, ``max_virtual``."""
    field = key.replace("-", "_")
    if key in SEARCH_KEYS:
        return field
    return f"{'model' if key in MODEL_KEYS else 'cluster'}.{field}"
