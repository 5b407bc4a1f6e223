"""Calibration from measurement: fit the cost model's efficiency factors to measured step times.

Three factors, each a multiplier on a group of :class:`~osprey_control.planner.costmodel.Efficiency`
constants, are fitted (the model has more constants, but a job's measurements cannot tell more apart):

- ``compute``: the GEMM, attention and fused-attention efficiencies, and the inverse of the elementwise
  memory traffic (a GPU, clock or kernel library that runs faster or slower than the preset);
- ``nvlink``: the achieved fraction of NVLink bandwidth (tensor-parallel collectives, intra-node sends);
- ``network``: the achieved fraction of the inter-node bandwidth (data-parallel all-reduce, pipeline sends).

The fit minimises the squared log error of predicted against measured step times by a pattern search in log
space (every direction, diagonals too; the step halves when nothing improves) within ``[1/4, 4]`` of the
calibrated constants: bounded, so one noisy measurement cannot make the
model absurd, and a factor the measurements do not constrain (a network term of plans that never leave the
node) stays at 1. With one measured plan only ``compute`` is fitted (one number fixes one factor).

Decision: the fitted model re-ranks the same search; the report gives the fit's median and largest error
before and after, so a user can see whether the measurements agree with the model at all.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from osprey_control.planner.costmodel import DEFAULT_EFFICIENCY, Efficiency, evaluate
from osprey_control.planner.hardware import Cluster
from osprey_control.planner.model import ModelSpec
from osprey_control.planner.plan import Plan

__all__ = ["FACTORS", "Calibration", "Measured", "apply_factors", "fit"]

FACTORS = ("compute", "nvlink", "network")
_BOUND = 4.0
_MAX_ITERATIONS = 400
_MIN_STEP = 1e-4


def _factors(logs: dict[str, float]) -> dict[str, float]:
    return {name: math.exp(value) for name, value in logs.items()}


@dataclass(frozen=True, slots=True)
class Measured:
    """One plan as it ran (with the model options it ran with) and its measured seconds per step."""

    model: ModelSpec
    plan: Plan
    step_time_s: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.step_time_s) or self.step_time_s <= 0:
            raise ValueError(f"step_time_s must be a positive number, got {self.step_time_s!r}")


@dataclass(frozen=True, slots=True)
class Calibration:
    factors: dict[str, float]
    efficiency: Efficiency
    points: int
    errors_before: tuple[float, ...]
    errors_after: tuple[float, ...]

    @staticmethod
    def summary(errors: Sequence[float]) -> dict[str, float]:
        absolute = [abs(e) for e in errors]
        return {"median_abs_error": statistics.median(absolute), "max_abs_error": max(absolute)}

    def to_dict(self) -> dict[str, object]:
        return {
            "points": self.points,
            "factors": dict(self.factors),
            "before": self.summary(self.errors_before),
            "after": self.summary(self.errors_after),
            "errors_after": list(self.errors_after),
        }


def apply_factors(base: Efficiency, factors: dict[str, float]) -> Efficiency:
    """``base`` with each group of constants scaled by its factor (missing factors are 1)."""
    compute = factors.get("compute", 1.0)
    return dataclasses.replace(
        base,
        gemm_scale=base.gemm_scale * compute,
        attention=min(1.0, base.attention * compute),
        flash_attention=min(2.0, base.flash_attention * compute),
        memory_touches=base.memory_touches / compute,
        layer_overhead_s=base.layer_overhead_s / compute,
        nvlink=min(1.0, base.nvlink * factors.get("nvlink", 1.0)),
        network=min(1.0, base.network * factors.get("network", 1.0)),
    )


def _errors(measured: Sequence[Measured], cluster: Cluster, efficiency: Efficiency) -> list[float]:
    """Relative error of each prediction, (predicted - measured) / measured."""
    errors = []
    for point in measured:
        predicted = evaluate(point.model, cluster, point.plan, efficiency=efficiency).step_time_s
        errors.append(predicted / point.step_time_s - 1.0)
    return errors


def _loss(measured: Sequence[Measured], cluster: Cluster, efficiency: Efficiency) -> float:
    return sum(math.log1p(e) ** 2 for e in _errors(measured, cluster, efficiency))


def fit(measured: Sequence[Measured], cluster: Cluster, base: Efficiency = DEFAULT_EFFICIENCY) -> Calibration:
    """Fit the factors to ``measured`` (at least one plan); raises ValueError on none."""
    if not measured:
        raise ValueError("calibration needs at least one measured plan")
    free = FACTORS if len(measured) > 1 else ("compute",)
    span = math.log(_BOUND)
    point = dict.fromkeys(FACTORS, 0.0)  # log of each factor
    best = _loss(measured, cluster, base)
    moves = [m for m in itertools.product((-1, 0, 1), repeat=len(free)) if any(m)]
    step = span / 2
    for _ in range(_MAX_ITERATIONS):
        if step < _MIN_STEP:
            break
        # Pattern search over every direction of the free factors (diagonals too: the factors are
        # correlated, a valley along a diagonal is common); halve the step when nothing improves.
        improved = False
        for move in moves:
            trial = dict(point)
            for name, sign in zip(free, move, strict=True):
                trial[name] = max(-span, min(span, point[name] + sign * step))
            loss = _loss(measured, cluster, apply_factors(base, _factors(trial)))
            if loss < best - 1e-15:
                best, point, improved = loss, trial, True
        if not improved:
            step /= 2
    factors = _factors(point)
    fitted = apply_factors(base, factors)
    return Calibration(
        factors=factors,
        efficiency=fitted,
        points=len(measured),
        errors_before=tuple(_errors(measured, cluster, base)),
        errors_after=tuple(_errors(measured, cluster, fitted)),
    )


_OPTION_FIELDS = ("recompute", "sequence_parallel", "optimizer_sharding", "precision")


def measured_from_rows(rows: Sequence[dict[str, object]], model: ModelSpec, gpus: int) -> list[Measured]:
    """Measured plans from rows of ``tp, pp, micro_batch[, virtual, dp], step_time_s`` and optionally the
    options the plan ran with (``recompute``, ``sequence_parallel`` on/off, ``optimizer_sharding``,
    ``precision``; missing: the model's). Raises ValueError naming the row and field."""
    from osprey_control.planner.config import parse_evaluate  # noqa: PLC0415 - config imports search

    measured = []
    for index, row in enumerate(rows, start=1):
        where = f"row {index}"
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a mapping of tp, pp, micro_batch, step_time_s")
        fields = {str(k).strip().replace("-", "_"): v for k, v in row.items() if v not in (None, "")}
        unknown = sorted(
            set(fields) - {"tp", "pp", "dp", "micro_batch", "virtual", "step_time_s", *_OPTION_FIELDS}
        )
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r}")
        if "step_time_s" not in fields:
            raise ValueError(f"{where}: step_time_s is required (measured seconds per step)")
        try:
            seconds = float(str(fields["step_time_s"]))
        except ValueError:
            raise ValueError(
                f"{where}: step_time_s must be a positive number, got {fields['step_time_s']!r}"
            ) from None
        layout = {k: fields[k] for k in ("tp", "pp", "dp", "micro_batch", "virtual") if k in fields}
        try:
            plan = parse_evaluate(layout, gpus)
            variant = _with_options(model, fields)
            measured.append(Measured(variant, plan, seconds))
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    return measured


def _with_options(model: ModelSpec, fields: dict[str, object]) -> ModelSpec:
    from osprey_control.planner.model import OptimizerSharding, Precision, Recompute  # noqa: PLC0415

    changes: dict[str, object] = {}
    try:
        if "recompute" in fields:
            changes["recompute"] = Recompute(str(fields["recompute"]).strip().lower())
        if "optimizer_sharding" in fields:
            changes["optimizer_sharding"] = OptimizerSharding(
                str(fields["optimizer_sharding"]).strip().lower()
            )
        if "precision" in fields:
            changes["precision"] = Precision(str(fields["precision"]).strip().lower())
    except ValueError as error:
        raise ValueError(f"{error}") from None
    if "sequence_parallel" in fields:
        value = str(fields["sequence_parallel"]).strip().lower()
        if value not in {"on", "off", "true", "false"}:
            raise ValueError(f"sequence_parallel must be on or off, got {fields['sequence_parallel']!r}")
        changes["sequence_parallel"] = value in {"on", "true"}
    return dataclasses.replace(model, **changes)  # type: ignore[arg-type]
