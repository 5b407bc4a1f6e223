"""Published H100 and B200 results (tests/planner/data, provenance in its README) as model + cluster + the
published layout, and the planner's prediction for each: shared by test_cross_generation.py and the docs.

A published row fixes tp, pp and dp (and, for NeMo, the micro-batch and interleaving); what it leaves out
(micro-batch, interleaving, recompute, sequence parallelism, distributed optimizer) the planner chooses: the
prediction is the best plan with the published layout. Throughput is model FLOP/s per GPU (no recompute
counted: 72 B s l h^2 (1 + s/(6h) + V/(12 l h))), what both sources report."""

from __future__ import annotations

import csv
import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path

from osprey_control.planner import Cluster, Evaluation, ModelSpec, cluster
from osprey_control.planner.model import Precision
from osprey_control.planner.search import Knobs, SearchOptions, search

__all__ = [
    "PublishedRow",
    "cross_generation_table",
    "h100_rows",
    "llama_rows",
    "model_tflops",
    "nemo_rows",
    "predict",
]

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class PublishedRow:
    name: str
    model: ModelSpec
    cluster: Cluster
    tp: int
    pp: int
    dp: int
    micro_batch: int | None
    virtual: int | None
    tflops_per_gpu: float


def _read(name: str) -> list[dict[str, str]]:
    with (DATA / name).open() as handle:
        return list(csv.DictReader(line for line in handle if not line.startswith("#")))


def h100_rows() -> list[PublishedRow]:
    """Megatron-LM's weak-scaling table: bf16, seq 4096, vocab 131072, untied embeddings, Megatron-Core's
    flash attention and communication overlap, DGX H100 (8 x 400 Gb/s InfiniBand per node: the same 3200 Gb/s
    as a p5.48xlarge)."""
    rows = []
    for r in _read("megatron_h100_weak_scaling.csv"):
        model = ModelSpec(
            layers=int(r["layers"]),
            hidden=int(r["hidden"]),
            heads=int(r["attn_heads"]),
            seq=4096,
            vocab=131072,
            global_batch=int(r["global_batch"]),
            flash_attention=True,
            tied_embeddings=False,
            comm_overlap=True,
        )
        gpus = int(r["gpus"])
        rows.append(
            PublishedRow(
                f"{r['params_B']}B",
                model,
                cluster(gpus, instance_type="p5.48xlarge"),
                int(r["tp"]),
                int(r["pp"]),
                int(r["dp"]),
                None,
                None,
                float(r["tflops_per_gpu"]),
            )
        )
    return rows


def nemo_rows() -> list[PublishedRow]:
    """NeMo's GPT3 FP8 rows (H100 and B200): seq 2048, vocab 51200, tied embeddings (GPT-3)."""
    rows = []
    for r in _read("nemo_gpt3_fp8.csv"):
        model = ModelSpec(
            layers=int(r["layers"]),
            hidden=int(r["hidden"]),
            heads=int(r["heads"]),
            seq=2048,
            vocab=51200,
            global_batch=int(r["global_batch"]),
            precision=Precision.FP8,
            flash_attention=True,
            comm_overlap=True,
        )
        rows.append(_nvidia_row(r, model, float(r["model_tflops_per_gpu"])))
    return rows


def llama_rows() -> list[PublishedRow]:
    """NVIDIA's Llama 2 and Llama 3 FP8 rows (H100 and B200): grouped-query attention where the model has it,
    SwiGLU, untied embeddings. The published tokens/s are expressed in the planner's model FLOPs (whole
    attention square), so the error is the tokens/s error."""
    rows = []
    for r in _read("nemo_llama_fp8.csv"):
        model = ModelSpec(
            layers=int(r["layers"]),
            hidden=int(r["hidden"]),
            heads=int(r["heads"]),
            seq=int(r["seq"]),
            vocab=int(r["vocab"]),
            global_batch=int(r["global_batch"]),
            precision=Precision.FP8,
            flash_attention=True,
            comm_overlap=True,
            tied_embeddings=False,
            ffn_hidden=int(r["ffn_hidden"]),
            kv_heads=int(r["kv_heads"]),
            gated_mlp=True,
        )
        per_token = model.model_flops_per_iteration() / (model.global_batch * model.seq)
        rows.append(_nvidia_row(r, model, float(r["tokens_per_s_per_gpu"]) * per_token / 1e12))
    return rows


def _nvidia_row(r: dict[str, str], model: ModelSpec, tflops_per_gpu: float) -> PublishedRow:
    """A row of NVIDIA's performance pages (DGX-H100 as p5.48xlarge, DGX-B200 as p6-b200.48xlarge), the
    micro-batch and interleaving as published."""
    gpus, tp, pp = int(r["gpus"]), int(r["tp"]), int(r["pp"])
    instance = "p6-b200.48xlarge" if r["system"] == "DGX-B200" else "p5.48xlarge"
    return PublishedRow(
        f"{r['model']} {gpus}x{r['system'].removeprefix('DGX-')} ({r['source']})",
        model,
        cluster(gpus, instance_type=instance),
        tp,
        pp,
        gpus // (tp * pp),
        int(r["micro_batch"]),
        int(r["vp"]),
        tflops_per_gpu,
    )


def model_tflops(row: PublishedRow, evaluation: Evaluation) -> float:
    return row.model.model_flops_per_iteration() / row.cluster.gpus / evaluation.step_time_s / 1e12


def predict(row: PublishedRow, options: SearchOptions | None = None) -> tuple[Evaluation, Evaluation]:
    """(the best plan with the published layout, the planner's best plan overall), same precision."""
    base = options or SearchOptions()
    if row.virtual is not None and row.virtual > base.max_virtual:
        # NeMo's Llama 2 recipes interleave deeper (10, 20) than the search's default bound.
        base = dataclasses.replace(base, max_virtual=row.virtual)
    knobs = Knobs(precision=(row.model.precision,))
    result = search(row.model, row.cluster, dataclasses.replace(base, knobs=knobs), keep_all=True)
    published = [
        e
        for e in result.everything
        if e.feasible
        and (e.plan.tp, e.plan.pp, e.plan.dp) == (row.tp, row.pp, row.dp)
        and row.micro_batch in (None, e.plan.micro_batch)
        and row.virtual in (None, e.plan.virtual)
    ]
    if not published or result.best is None:
        raise ValueError(f"{row.name}: the published layout does not fit in the planner's memory model")
    # The fastest completion: the published runs were tuned for throughput.
    return min(published, key=lambda e: e.step_time_s), result.best


def _layout(e: Evaluation) -> str:
    p = e.plan
    virtual = f" v{p.virtual}" if p.virtual > 1 else ""
    sp = "+sp" if e.sequence_parallel else ""
    return f"{p.tp}x{p.pp}x{p.dp} b{p.micro_batch}{virtual} {e.recompute}{sp}"


def cross_generation_table(rows: list[PublishedRow]) -> str:
    """The published rows against the planner: prediction error and published / best (docs/planner.md)."""
    lines = [
        "| model | published layout (tp x pp x dp) | published TFLOP/s | planner's completion | predicted | error "
        "| planner's best | best predicted | published ÷ best |",
        "|---|---|---:|---|---:|---:|---|---:|---:|",
    ]
    errors, within, agreeing = [], 0, 0
    for row in rows:
        published, best = predict(row)
        predicted, best_tflops = model_tflops(row, published), model_tflops(row, best)
        error = predicted / row.tflops_per_gpu - 1.0
        ratio = predicted / best_tflops
        errors.append(abs(error))
        within += abs(error) <= 0.20
        agreeing += ratio >= 0.90
        lines.append(
            f"| {row.name} | {row.tp}x{row.pp}x{row.dp} | {row.tflops_per_gpu:g} | {_layout(published)} | "
            f"{predicted:.0f} | {error:+.1%} | {_layout(best)} | {best_tflops:.0f} | {ratio:.3f} |"
        )
    median = statistics.median(errors)
    lines.append("")
    lines.append(
        f"Median absolute error {median:.1%}, largest {max(errors):.1%}; within 20% on {within} of {len(rows)}; "
        f"the published layout within 10% of the planner's best on {agreeing} of {len(rows)}."
    )
    return "\n".join(lines)
