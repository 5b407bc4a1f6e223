"""A parallel plan (tp x pp x dp, micro-batch, virtual stages), its layout constraints, and the cost model's
verdict on it (``Evaluation``), with the JSON shape the CLI and the plan record use."""

from __future__ import annotations

from dataclasses import dataclass

from osprey_control.planner.hardware import Cluster
from osprey_control.planner.model import ModelSpec

__all__ = ["Evaluation", "Plan", "PlanError", "check_plan"]


class PlanError(ValueError):
    """A plan that cannot run at all on this model and cluster (not merely one that is slow or too big)."""


@dataclass(frozen=True, slots=True)
class Plan:
    tp: int
    pp: int
    dp: int
    micro_batch: int
    virtual: int = 1

    def key(self) -> tuple[int, int, int, int, int]:
        return (self.tp, self.pp, self.dp, self.micro_batch, self.virtual)

    def to_dict(self) -> dict[str, int]:
        return {
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "micro_batch": self.micro_batch,
            "virtual": self.virtual,
        }


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One plan's predicted step: times in seconds per step, memory in GiB per GPU (busiest stage)."""

    plan: Plan
    micro_batches: int
    step_time_s: float
    compute_s: float
    tp_comm_s: float
    pp_comm_s: float
    bubble_s: float
    dp_comm_s: float
    dp_exposed_s: float
    optimizer_s: float
    # The schedule's fixed cost per micro-batch (Efficiency.micro_batch_overhead_s), m of them per step.
    schedule_s: float
    bubble_fraction: float
    tflops_per_gpu: float
    model_flops_utilization: float
    layer_states_gib: float
    embedding_states_gib: float
    activations_gib: float
    working_gib: float
    memory_gib_per_gpu: float
    memory_limit_gib: float
    feasible: bool
    reason: str
    tokens_per_s: float
    cost_per_hour: float
    # The model-side options this evaluation was made with (the search varies them).
    recompute: str = "full"
    sequence_parallel: bool = False
    distributed_optimizer: bool = False
    precision: str = "bf16"
    # Node indices per pipeline stage when nodes differ in speed (empty: all nominal, any order).
    stage_nodes: tuple[tuple[int, ...], ...] = ()

    def options(self) -> dict[str, object]:
        return {
            "recompute": self.recompute,
            "sequence_parallel": self.sequence_parallel,
            "distributed_optimizer": self.distributed_optimizer,
            "precision": self.precision,
        }

    @property
    def idle_fraction(self) -> float:
        """Share of the step a GPU spends waiting: pipeline bubble plus communication not hidden by compute."""
        idle = self.bubble_s + self.tp_comm_s + self.pp_comm_s + self.dp_exposed_s + self.schedule_s
        return idle / self.step_time_s if self.step_time_s > 0 else 0.0

    @property
    def score(self) -> float:
        """Throughput / (cost x idle penalty): tokens per dollar, discounted by 1 + idle fraction so that of
        two equally fast plans the one less exposed to communication and bubbles wins. The search ranks
        only feasible plans (unless told otherwise), so the score itself ignores memory."""
        return self.tokens_per_s * 3600.0 / (self.cost_per_hour * (1.0 + self.idle_fraction))

    def to_dict(self) -> dict[str, object]:
        return {
            **self.plan.to_dict(),
            **self.options(),
            "micro_batches": self.micro_batches,
            "step_time_s": self.step_time_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "model_flops_utilization": self.model_flops_utilization,
            "memory_gib_per_gpu": self.memory_gib_per_gpu,
            "memory_limit_gib": self.memory_limit_gib,
            "bubble_fraction": self.bubble_fraction,
            "idle_fraction": self.idle_fraction,
            "feasible": self.feasible,
            "reason": self.reason,
            "score": self.score,
            "tokens_per_s": self.tokens_per_s,
            "stage_nodes": [list(stage) for stage in self.stage_nodes] or None,
            "breakdown": {
                "compute_s": self.compute_s,
                "tp_comm_s": self.tp_comm_s,
                "pp_comm_s": self.pp_comm_s,
                "bubble_s": self.bubble_s,
                "dp_comm_s": self.dp_comm_s,
                "dp_exposed_s": self.dp_exposed_s,
                "optimizer_s": self.optimizer_s,
                "schedule_s": self.schedule_s,
                "memory": {
                    "layer_states_gib": self.layer_states_gib,
                    "embedding_states_gib": self.embedding_states_gib,
                    "activations_gib": self.activations_gib,
                    "working_gib": self.working_gib,
                },
            },
        }


def check_plan(model: ModelSpec, cluster: Cluster, plan: Plan, *, uneven_pipeline: bool = False) -> None:
    """Raise PlanError when the plan cannot be laid out; the message says which constraint fails."""
    tp, pp, dp, b, v = plan.key()
    if min(tp, pp, dp, b, v) < 1:
        raise PlanError("tp, pp, dp, micro_batch and virtual must all be positive")
    if tp * pp * dp != cluster.gpus:
        raise PlanError(f"tp*pp*dp = {tp * pp * dp} but the cluster has {cluster.gpus} GPUs")
    if not model.splits_heads(tp):
        kv = f" and the {model.kv_head_count} key/value heads" if model.kv_head_count != model.heads else ""
        raise PlanError(f"tp={tp} must divide the {model.heads} attention heads{kv}")
    if tp > cluster.gpus_per_node and not cluster.allow_cross_node_tp:
        raise PlanError(
            f"tp={tp} exceeds the {cluster.gpus_per_node} GPUs of a node (cross-node tp not allowed)"
        )
    if tp < cluster.gpus_per_node and cluster.gpus_per_node % tp:
        raise PlanError(f"tp={tp} must divide the {cluster.gpus_per_node} GPUs of a node")
    if pp > model.layers or (model.layers % pp and not uneven_pipeline):
        raise PlanError(f"pp={pp} must divide the {model.layers} layers")
    if model.global_batch % (dp * b):
        raise PlanError(f"global batch {model.global_batch} is not divisible by dp*micro_batch = {dp * b}")
    if v > 1:
        micro_batches = model.global_batch // (dp * b)
        if pp == 1:
            raise PlanError("virtual stages need pp > 1")
        if model.layers % (pp * v):
            raise PlanError(
                f"virtual={v}: the {model.layers} layers must split into pp*virtual = {pp * v} chunks"
            )
        if micro_batches % pp:
            raise PlanError(f"virtual={v}: the {micro_batches} micro-batches must be a multiple of pp={pp}")
