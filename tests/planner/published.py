"""The published figures (tests/planner/data, copied from ../shared/data/planner with its provenance) as
model + cluster + plan triples, shared by the validation tests and the docs table."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from osprey_control.planner import Cluster, ModelSpec, Plan, cluster

__all__ = ["DATA", "KorthikantiRow", "MemoryRow", "Sc21Row", "korthikanti_rows", "memory_rows", "sc21_rows"]

DATA = Path(__file__).resolve().parent / "data"
SEQ = 2048
VOCAB = 51200


def _read(name: str) -> list[dict[str, str]]:
    with (DATA / name).open() as handle:
        return list(csv.DictReader(line for line in handle if not line.startswith("#")))


def selene(gpus: int) -> Cluster:
    """DGX A100-80GB nodes: NVSwitch inside, 8 x 200 Gb/s HDR InfiniBand per node."""
    return cluster(gpus, gpu="A100-80GB", gpus_per_node=8, network_gbits=1600)


@dataclass(frozen=True)
class Sc21Row:
    name: str
    model: ModelSpec
    cluster: Cluster
    plan: Plan
    tflops_per_gpu: float


@dataclass(frozen=True)
class KorthikantiRow:
    name: str
    model: ModelSpec
    cluster: Cluster
    plan: Plan
    iter_s_full: float
    iter_s_selective: float


@dataclass(frozen=True)
class MemoryRow:
    name: str
    model: ModelSpec
    plan: Plan
    states_gib: float
    activations_tp_gib: float
    activations_selective_gib: float


def sc21_rows() -> list[Sc21Row]:
    rows = []
    for r in _read("megatron_sc21_table1.csv"):
        layers, tp, pp, gpus = int(r["layers"]), int(r["tp"]), int(r["pp"]), int(r["gpus"])
        per_virtual = r["virtual_layers_per_stage(sc21 script)"]
        # The scripts give layers per virtual stage; the planner counts chunks per stage.
        virtual = layers // pp // int(per_virtual) if per_virtual else 1
        model = ModelSpec(
            layers=layers,
            hidden=int(r["hidden"]),
            heads=int(r["attn_heads"]),
            seq=SEQ,
            vocab=VOCAB,
            global_batch=int(r["global_batch"]),
        )
        plan = Plan(tp, pp, gpus // (tp * pp), int(r["micro_batch(sc21 script)"]), virtual)
        rows.append(Sc21Row(f"{r['params_B']}B", model, selene(gpus), plan, float(r["tflops_per_gpu"])))
    return rows


def korthikanti_rows() -> list[KorthikantiRow]:
    rows = []
    for r in _read("korthikanti_tables.csv"):
        pp = int(r["pp"])
        model = ModelSpec(
            layers=int(r["layers"]),
            hidden=int(r["hidden"]),
            heads=int(r["heads"]),
            seq=SEQ,
            vocab=VOCAB,
            global_batch=int(r["global_batch"]),
        )
        # The table's header: interleaving with 3 chunks for 175B and 530B.
        virtual = 3 if r["model"] in {"175B", "530B"} else 1
        plan = Plan(int(r["tp"]), pp, 1, int(r["micro_batch"]), virtual)
        rows.append(
            KorthikantiRow(
                r["model"],
                model,
                selene(int(r["gpus"])),
                plan,
                float(r["iter_s_full_recompute"]),
                float(r["iter_s_seqpar_selective"]),
            )
        )
    return rows


def memory_rows() -> list[MemoryRow]:
    batches = {row.name: row.model.global_batch for row in korthikanti_rows()}
    rows = []
    for r in _read("korthikanti_memory.csv"):
        model = ModelSpec(
            layers=int(r["layers"]),
            hidden=int(r["hidden"]),
            heads=int(r["heads"]),
            seq=SEQ,
            vocab=VOCAB,
            global_batch=batches[r["model"]],
        )
        plan = Plan(int(r["tp"]), int(r["pp"]), 1, int(r["micro_batch"]), int(r["interleave"]))
        rows.append(
            MemoryRow(
                r["model"],
                model,
                plan,
                float(r["params_and_optimizer_gib"]),
                float(r["activations_tp_only_gib"]),
                float(r["activations_tp_sp_selective_gib"]),
            )
        )
    return rows
