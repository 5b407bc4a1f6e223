"""Re-planning: given what the job measured (network bandwidth and latency, per-GPU speed), propose a new
plan only when it is predicted to save more than a hysteresis threshold of step time, and not more often
than every ``OSPREY_INTERVAL`` steps, so a job never flaps between two nearly equal plans.

The current plan is scored in the node order the job runs it (``CurrentPlan.stage_nodes``, Megatron's rank
order when it applied none), so a straggler on its critical stage costs it what it costs the job; the best
plan is placed (:func:`~osprey_control.planner.placement.place`). A proposal with the current degrees and
another node order is a placement-only switch, under the same interval and a threshold of its own,
``placement_hysteresis`` (3% by default against 10% for new degrees).

Decision: the plan hysteresis guards against the cost model's error between *different* layouts (about 3% on
SC21, more on other stacks) and against re-sharding a checkpoint for a gain that may not be real. A
placement-only switch compares the same layout on two node orders: the model's error on that layout is the
same on both sides, the nodes only change which stage they load, and what is left is the noise of the speed
signal (a node within 2% of the median is not called slow, ``speeds.STRAGGLER_SPEED``). So its threshold sits
just above that noise: a 5% straggler on the critical stage is moved with the defaults. When the best plan's
new degrees do not clear their hysteresis, the current degrees placed are still considered on their own.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from osprey_control.planner.costmodel import Efficiency, evaluate
from osprey_control.planner.hardware import Cluster
from osprey_control.planner.model import ModelSpec
from osprey_control.planner.placement import Placement, place, running
from osprey_control.planner.plan import Evaluation, Plan
from osprey_control.planner.search import SearchOptions, search

__all__ = [
    "DEFAULT_HYSTERESIS",
    "DEFAULT_INTERVAL",
    "DEFAULT_PLACEMENT_HYSTERESIS",
    "CurrentPlan",
    "Measurement",
    "ReplanDecision",
    "interval_from_env",
    "replan",
    "validate_threshold",
]

DEFAULT_HYSTERESIS = 0.10
DEFAULT_PLACEMENT_HYSTERESIS = 0.03
DEFAULT_INTERVAL = 60


def interval_from_env(environ: Mapping[str, str] | None = None) -> int:
    """``OSPREY_INTERVAL`` (steps between re-planning decisions; 50-100 recommended), default 60."""
    raw = (os.environ if environ is None else environ).get("OSPREY_INTERVAL", "").strip()
    if not raw:
        return DEFAULT_INTERVAL
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"OSPREY_INTERVAL must be a positive integer number of steps, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"OSPREY_INTERVAL must be a positive integer number of steps, got {raw!r}")
    return value


@dataclass(frozen=True, slots=True)
class CurrentPlan:
    """The plan a job runs now, on the cluster it was planned for, adopted at training step ``since_step``."""

    model: ModelSpec
    cluster: Cluster
    plan: Plan
    since_step: int = 0
    # The node indices per pipeline stage the job runs (it applied a record's ``stage_nodes``); () = rank order.
    stage_nodes: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class Measurement:
    """What the job observed at training step ``step``. None keeps the nominal value.

    ``network_gbits`` is the effective per-node bandwidth; ``speed_factors`` one relative speed per GPU."""

    step: int
    network_gbits: float | None = None
    network_latency_us: float | None = None
    nvlink_gbytes: float | None = None
    speed_factors: Sequence[float] | None = field(default=None)
    # The efficiency model fitted to the job's measured step time (calibrate.fit), if any.
    efficiency: Efficiency | None = None


@dataclass(frozen=True, slots=True)
class ReplanDecision:
    """``switch`` says whether to adopt ``proposed``; ``reason`` is one of ``switch``, ``below-hysteresis``,
    ``too-soon``, ``no-better-plan`` or ``no-feasible-plan``."""

    switch: bool
    reason: str
    current: Evaluation
    proposed: Evaluation | None
    expected_saving_s: float
    expected_saving_fraction: float
    hysteresis: float
    interval: int
    step: int

    def to_dict(self) -> dict[str, object]:
        return {
            "switch": self.switch,
            "reason": self.reason,
            "step": self.step,
            "hysteresis": self.hysteresis,
            "interval": self.interval,
            "expected_saving_s": self.expected_saving_s,
            "expected_saving_fraction": self.expected_saving_fraction,
            "current": self.current.to_dict(),
            "proposed": self.proposed.to_dict() if self.proposed else None,
        }


def measured_cluster(nominal: Cluster, measured: Measurement) -> Cluster:
    return nominal.with_changes(
        network_gbits=measured.network_gbits,
        network_latency_us=measured.network_latency_us,
        nvlink_gbytes=measured.nvlink_gbytes,
        speed_factors=measured.speed_factors,
    )


def validate_threshold(name: str, value: float) -> None:
    """``ValueError`` naming ``name`` unless ``value`` is a fraction in [0, 1) (a hysteresis threshold)."""
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a fraction in [0, 1), got {value!r}")


def replan(
    current: CurrentPlan,
    measured: Measurement,
    *,
    hysteresis: float = DEFAULT_HYSTERESIS,
    interval: int | None = None,
    options: SearchOptions | None = None,
    placement_hysteresis: float = DEFAULT_PLACEMENT_HYSTERESIS,
) -> ReplanDecision:
    """Re-evaluate the current plan and search for a better one on the cluster as measured.

    A switch is proposed when the best plan's predicted step time is shorter than the current plan's by
    more than ``hysteresis`` (a fraction; ``placement_hysteresis`` when only the node order changes) and at
    least ``interval`` steps (default ``OSPREY_INTERVAL``) have passed since the current plan was adopted."""
    validate_threshold("hysteresis", hysteresis)
    validate_threshold("placement_hysteresis", placement_hysteresis)
    interval = interval_from_env() if interval is None else interval
    options = options or SearchOptions()
    if measured.efficiency is not None:
        options = dataclasses.replace(options, efficiency=measured.efficiency)
    observed = measured_cluster(current.cluster, measured)
    order = running(observed, current.plan.pp, current.stage_nodes)

    def scored(placement: Placement) -> Evaluation:
        return evaluate(
            current.model,
            observed,
            current.plan,
            memory_headroom=options.memory_headroom,
            efficiency=options.efficiency,
            uneven_pipeline=options.uneven_pipeline,
            placement=placement,
        )

    now = scored(order)
    best = search(current.model, observed, options).best

    def decision(switch: bool, reason: str, proposed: Evaluation | None, threshold: float) -> ReplanDecision:
        saving = now.step_time_s - proposed.step_time_s if proposed else 0.0
        return ReplanDecision(
            switch=switch,
            reason=reason,
            current=now,
            proposed=proposed,
            expected_saving_s=saving,
            expected_saving_fraction=saving / now.step_time_s if now.step_time_s > 0 else 0.0,
            hysteresis=threshold,
            interval=interval,
            step=measured.step,
        )

    if best is None:
        return decision(False, "no-feasible-plan", None, hysteresis)
    # The current degrees on the best node order, held to the placement threshold. (When the search's best is
    # these degrees and options, it is this very evaluation: the search places every layout the same way.)
    placed = place(observed, current.plan.pp)
    moved = scored(placed) if placed.stage_nodes and placed.stage_nodes != order.stage_nodes else None
    candidates: list[tuple[Evaluation, float]] = []
    # Placement-only means the same degrees *and* the same model options (the search may change recompute,
    # sequence parallelism, the optimizer or precision): anything else is a new plan, held to the hysteresis.
    if best.plan != current.plan or best.options() != now.options():
        candidates.append((best, hysteresis))
    if moved is not None:
        candidates.append((moved, placement_hysteresis))
    better = [(e, threshold) for e, threshold in candidates if e.step_time_s < now.step_time_s]
    if not better:
        return decision(False, "no-better-plan", best, hysteresis)
    clearing = [(e, t) for e, t in better if (now.step_time_s - e.step_time_s) / now.step_time_s > t]
    if not clearing:
        proposed, threshold = min(better, key=lambda item: item[0].step_time_s)
        return decision(False, "below-hysteresis", proposed, threshold)
    proposed, threshold = min(clearing, key=lambda item: item[0].step_time_s)
    if measured.step - current.since_step < interval:
        return decision(False, "too-soon", proposed, threshold)
    return decision(True, "switch", proposed, threshold)
