"""Re-planning: given what the job measured (network bandwidth and latency, per-GPU speed), propose a new
plan only when it is predicted to save more than a hysteresis threshold of step time, and not more often
than every ``OSPREY_INTERVAL`` steps, so a job never flaps between two nearly equal plans.

The current plan is scored in the node order the job runs it (``CurrentPlan.stage_nodes``, Megatron's rank
order when it applied none), so a straggler on its critical stage costs it what it costs the job; the best
plan is placed (:func:`~osprey_control.planner.placement.place`). A proposal with the current degrees and
another node order is a placement-only switch, under the same hysteresis and interval.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from osprey_control.planner.costmodel import Efficiency, evaluate
from osprey_control.planner.hardware import Cluster
from osprey_control.planner.model import ModelSpec
from osprey_control.planner.placement import running
from osprey_control.planner.plan import Evaluation, Plan
from osprey_control.planner.search import SearchOptions, search

__all__ = [
    "DEFAULT_HYSTERESIS",
    "DEFAULT_INTERVAL",
    "CurrentPlan",
    "Measurement",
    "ReplanDecision",
    "interval_from_env",
    "measured_cluster",
    "replan",
]

DEFAULT_HYSTERESIS = 0.10
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


def replan(
    current: CurrentPlan,
    measured: Measurement,
    *,
    hysteresis: float = DEFAULT_HYSTERESIS,
    interval: int | None = None,
    options: SearchOptions | None = None,
) -> ReplanDecision:
    """Re-evaluate the current plan and search for a better one on the cluster as measured.

    A switch is proposed when the best plan's predicted step time is shorter than the current plan's by
    more than ``hysteresis`` (a fraction) and at least ``interval`` steps (default ``OSPREY_INTERVAL``)
    have passed since the current plan was adopted."""
    if not 0.0 <= hysteresis < 1.0:
        raise ValueError(f"hysteresis must be a fraction in [0, 1), got {hysteresis!r}")
    interval = interval_from_env() if interval is None else interval
    options = options or SearchOptions()
    if measured.efficiency is not None:
        options = dataclasses.replace(options, efficiency=measured.efficiency)
    observed = measured_cluster(current.cluster, measured)
    order = running(observed, current.plan.pp, current.stage_nodes)
    now = evaluate(
        current.model,
        observed,
        current.plan,
        memory_headroom=options.memory_headroom,
        efficiency=options.efficiency,
        uneven_pipeline=options.uneven_pipeline,
        placement=order,
    )
    result = search(current.model, observed, options)
    best = result.best

    def decision(switch: bool, reason: str, proposed: Evaluation | None) -> ReplanDecision:
        saving = now.step_time_s - proposed.step_time_s if proposed else 0.0
        return ReplanDecision(
            switch=switch,
            reason=reason,
            current=now,
            proposed=proposed,
            expected_saving_s=saving,
            expected_saving_fraction=saving / now.step_time_s if now.step_time_s > 0 else 0.0,
            hysteresis=hysteresis,
            interval=interval,
            step=measured.step,
        )

    if best is None:
        return decision(False, "no-feasible-plan", None)
    same_order = not best.stage_nodes or best.stage_nodes == order.stage_nodes
    if (best.plan == current.plan and same_order) or best.step_time_s >= now.step_time_s:
        return decision(False, "no-better-plan", best)
    gain = (now.step_time_s - best.step_time_s) / now.step_time_s
    if gain <= hysteresis:
        return decision(False, "below-hysteresis", best)
    if measured.step - current.since_step < interval:
        return decision(False, "too-soon", best)
    return decision(True, "switch", best)
