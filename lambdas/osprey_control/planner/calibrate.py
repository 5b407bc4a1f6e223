"""Calibration from measurement: fit the cost model's efficiency factors to measured step times.

Three factors, each a multiplier on a group of :class:`~osprey_control.planner.costmodel.Efficiency`
constants, and two costs in seconds are fitted (the model has more constants, but a job's measurements cannot
tell more apart):

- ``compute``: the GEMM, attention and fused-attention efficiencies, and the inverse of the elementwise
  memory traffic (a GPU, clock or kernel library that runs faster or slower than the preset);
- ``nvlink``: the achieved fraction of NVLink bandwidth (tensor-parallel collectives, intra-node sends);
- ``network``: the achieved fraction of the inter-node bandwidth (data-parallel all-reduce, pipeline sends);
- ``layer_overhead_s``: a fixed cost added per transformer block and pass (``Efficiency.layer_overhead_s``,
  100 us in the calibrated model): the host's work per block that the GPU waits for, operator dispatch and
  kernel launches, which a stack that runs eagerly and synchronously (DeepSpeed's pipeline engine, launches
  made blocking against NCCL hangs) pays many times over. It is what makes a small micro-batch or a narrow
  tensor-parallel shard slow on such a stack, since the work per block shrinks and the cost does not, and a
  deep pipeline cheaper than a shallow one at equal micro-batch counts (fewer blocks per stage). Fitted only
  when the blocks of the measured plans do different amounts of work (micro-batch, tp or model differ):
  otherwise nothing separates it from ``compute``.
- ``micro_batch_overhead_s``: the schedule's fixed cost per micro-batch and stage
  (``Efficiency.micro_batch_overhead_s``, 0 in the calibrated model), which a runtime that interprets its
  pipeline schedule step by step pays and Megatron's own schedules do not. Fitted only when the plans run
  different numbers of micro-batches and, when the block cost is fitted too, have stages of different depths
  (blocks x passes): otherwise nothing separates it from ``compute`` or from the block cost.

Each cost is fitted only while there stay more measured plans than free dimensions (five plans for the block
cost, six for both): with as many, the fit is exact whatever the noise. With one measured plan only
``compute`` is fitted (one number fixes one factor).

The fit minimises the squared log error of predicted against measured step times (Levenberg-Marquardt,
steps projected onto the bounds: :mod:`.boxfit`) from the calibrated model and from each factor alone at
either end of its range, keeping the lowest.
The bounds: the factors in log space within ``[1/4, 4]`` of the calibrated constants (a link's at most its
nominal bandwidth), the overhead per micro-batch from 0 to a quarter of the shortest measured time per
micro-batch slot, the block cost from 0 to half of the shortest per block pass. Bounded, so one noisy
measurement cannot make the model absurd, and a factor the measurements do not constrain (a network term of
plans that never leave the node) stays at 1.

Decision: the fitted model re-ranks the same search; the report gives the fit's median and largest error
before and after, so a user can see whether the measurements agree with the model at all.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from osprey_control.planner.boxfit import Box, least_squares
from osprey_control.planner.costmodel import DEFAULT_EFFICIENCY, Efficiency, evaluate
from osprey_control.planner.hardware import Cluster
from osprey_control.planner.model import ModelSpec
from osprey_control.planner.placement import running
from osprey_control.planner.plan import Plan

__all__ = ["Calibration", "fit"]

FACTORS = ("compute", "nvlink", "network")
OVERHEAD = "micro_batch_overhead_s"
BLOCK_OVERHEAD = "layer_overhead_s"
# The added costs: fitted in seconds from 0 up, not as multipliers.
_COSTS = (OVERHEAD, BLOCK_OVERHEAD)
_BOUND = 4.0
# The overhead may take at most this share of the shortest measured time per micro-batch slot.
_OVERHEAD_SHARE = 0.25
# The block cost at most this share of the shortest measured time per block pass: on a host-bound stack
# the host's part of a small block is the larger one.
_BLOCK_SHARE = 0.5
# Weight of the pull towards the calibrated model, per scaled dimension: far below a 0.1% step-time error.
_PRIOR = 1e-4


def _factors(point: dict[str, float]) -> dict[str, float]:
    return {name: math.exp(value) for name, value in point.items() if name in FACTORS}


def _efficiency(base: Efficiency, point: dict[str, float]) -> Efficiency:
    fitted = apply_factors(base, _factors(point))
    # Each added cost goes on top of the (compute-scaled) constant it extends.
    added = {name: getattr(fitted, name) + point[name] for name in _COSTS if name in point}
    return dataclasses.replace(fitted, **added) if added else fitted


def _micro_batches(point: Measured) -> int:
    """Micro-batches per pipeline in one step."""
    return point.model.global_batch // (point.plan.dp * point.plan.micro_batch)


def _slots(point: Measured) -> int:
    """Micro-batch slots of one step through the pipeline (steady state plus fill and drain)."""
    return _micro_batches(point) + point.plan.pp - 1


def _block_passes(point: Measured) -> float:
    """Block passes of the busiest stage per micro-batch: its blocks times the passes each runs."""
    return point.model.stage_layers(point.plan.pp) * point.model.layer_passes().elementwise


def _distinct(values: Sequence[float]) -> int:
    return len({round(math.log(value), 6) for value in values})


def _block_bound(measured: Sequence[Measured]) -> float:
    """Upper bound of the added cost per block pass, or 0 when the measurements cannot separate it from
    compute: blocks that all do the same work."""
    work = [point.model.layer_gemm_flops() * point.plan.micro_batch / point.plan.tp for point in measured]
    if _distinct(work) < 2:
        return 0.0
    return _BLOCK_SHARE * min(point.step_time_s / _slots(point) / _block_passes(point) for point in measured)


def _overhead_bound(measured: Sequence[Measured], *, with_block_cost: bool) -> float:
    """Upper bound of the fitted overhead per micro-batch in seconds, or 0 when the measurements cannot
    separate it: one number of micro-batches for all (it would be ``compute``), or, next to a fitted block
    cost, stages all of one depth (it would be that cost)."""
    if len({_micro_batches(point) for point in measured}) < 2:
        return 0.0
    if with_block_cost and _distinct([_block_passes(point) for point in measured]) < 2:
        return 0.0
    return _OVERHEAD_SHARE * min(point.step_time_s / _slots(point) for point in measured)


@dataclass(frozen=True, slots=True)
class Measured:
    """One plan as it ran (with the model options it ran with, on the node order ``stage_nodes``, () for
    Megatron's rank order) and its measured seconds per step."""

    model: ModelSpec
    plan: Plan
    step_time_s: float
    stage_nodes: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        if not math.isfinite(self.step_time_s) or self.step_time_s <= 0:
            raise ValueError(f"step_time_s must be a positive number, got {self.step_time_s!r}")


@dataclass(frozen=True, slots=True)
class Calibration:
    """``factors``: compute, nvlink and network multipliers; ``micro_batch_overhead_s``: the fitted schedule
    cost added per micro-batch and stage; ``added_layer_overhead_s``: the fitted cost added per block and
    pass, on top of the model's own ``layer_overhead_s`` (each 0 when the measurements could not separate
    it). ``efficiency`` holds the fitted model, totals included."""

    factors: dict[str, float]
    efficiency: Efficiency
    points: int
    errors_before: tuple[float, ...]
    errors_after: tuple[float, ...]
    micro_batch_overhead_s: float = 0.0
    added_layer_overhead_s: float = 0.0

    @staticmethod
    def summary(errors: Sequence[float]) -> dict[str, float]:
        absolute = [abs(e) for e in errors]
        return {"median_abs_error": statistics.median(absolute), "max_abs_error": max(absolute)}

    def added_costs(self) -> str:
        """The fitted costs as text for a log or a table, "" when none was fitted."""
        costs = []
        if self.micro_batch_overhead_s > 0:
            costs.append(f"{self.micro_batch_overhead_s * 1e3:.1f} ms per micro-batch and stage")
        if self.added_layer_overhead_s > 0:
            costs.append(f"{self.added_layer_overhead_s * 1e3:.2f} ms more per block and pass")
        return ", ".join(costs)

    def to_dict(self) -> dict[str, object]:
        return {
            "points": self.points,
            "factors": dict(self.factors),
            "micro_batch_overhead_s": self.micro_batch_overhead_s,
            "added_layer_overhead_s": self.added_layer_overhead_s,
            "before": self.summary(self.errors_before),
            "after": self.summary(self.errors_after),
            "errors_after": list(self.errors_after),
        }


def apply_factors(base: Efficiency, factors: dict[str, float]) -> Efficiency:
    """``base`` with each group of constants scaled by its factor (missing factors are 1). ``gemm_scale``
    multiplies the 16-bit and the FP8 GEMM efficiency alike; the FP8 casts are memory-bound work."""
    compute = factors.get("compute", 1.0)
    return dataclasses.replace(
        base,
        gemm_scale=base.gemm_scale * compute,
        attention=min(1.0, base.attention * compute),
        flash_attention=min(2.0, base.flash_attention * compute),
        memory_touches=base.memory_touches / compute,
        fp8_cast_bytes=base.fp8_cast_bytes / compute,
        fp8_transpose_bytes=base.fp8_transpose_bytes / compute,
        layer_overhead_s=base.layer_overhead_s / compute,
        nvlink=min(1.0, base.nvlink * factors.get("nvlink", 1.0)),
        network=min(1.0, base.network * factors.get("network", 1.0)),
    )


def _errors(measured: Sequence[Measured], cluster: Cluster, efficiency: Efficiency) -> list[float]:
    """Relative error of each prediction, (predicted - measured) / measured."""
    errors = []
    for point in measured:
        # A plan that ran can be laid out: layers that do not divide pp went to the first stages. It ran on
        # its own node order: a straggler on its critical stage is in the measured step.
        predicted = evaluate(
            point.model,
            cluster,
            point.plan,
            efficiency=efficiency,
            uneven_pipeline=True,
            placement=running(cluster, point.plan.pp, point.stage_nodes),
        ).step_time_s
        errors.append(predicted / point.step_time_s - 1.0)
    return errors


class _Problem:
    """Log residuals of the predictions as a function of the free dimensions, each scaled to ``[-1, 1]`` (the
    costs to ``[0, 1]``) so that one step size and one finite difference fit them all."""

    def __init__(self, measured: Sequence[Measured], cluster: Cluster, base: Efficiency) -> None:
        self.measured, self.cluster, self.base = measured, cluster, base
        span = math.log(_BOUND)
        self.scale = dict.fromkeys(FACTORS if len(measured) > 1 else ("compute",), span)
        # A cost is fitted only while there stay more measured plans than free dimensions: with as many, the
        # fit is exact whatever the noise, and says nothing.
        block_bound = _block_bound(measured) if len(measured) > len(self.scale) + 1 else 0.0
        if block_bound > 0:
            self.scale[BLOCK_OVERHEAD] = block_bound
        overhead_bound = (
            _overhead_bound(measured, with_block_cost=block_bound > 0)
            if len(measured) > len(self.scale) + 1
            else 0.0
        )
        if overhead_bound > 0:
            self.scale[OVERHEAD] = overhead_bound
        self.free = tuple(self.scale)
        # A link cannot beat its nominal bandwidth (apply_factors caps the fraction at 1): past that the
        # factor changes nothing, and a fit that wandered there would stop on a flat stretch.
        ceiling = {"nvlink": base.nvlink, "network": base.network}
        self.box = Box(
            lows=tuple(0.0 if name in _COSTS else -1.0 for name in self.free),
            highs=tuple(
                min(1.0, max(0.0, math.log(1.0 / ceiling[name]) / span)) if name in ceiling else 1.0
                for name in self.free
            ),
        )

    def starts(self) -> list[list[float]]:
        """The calibrated model, and each factor alone at either end of its range: a link the measurements
        barely constrain leaves two valleys (a slow network, or a fast one with the time put elsewhere), and
        starting from each end of every factor finds the deeper one."""
        origin = [0.0] * len(self.free)
        starts = [origin]
        for i, name in enumerate(self.free):
            if name in FACTORS:
                for end in (self.box.lows[i], self.box.highs[i]):
                    if end != 0.0:
                        starts.append([end if j == i else 0.0 for j in range(len(origin))])
        return starts

    def point(self, x: Sequence[float]) -> dict[str, float]:
        return {name: value * self.scale[name] for name, value in zip(self.free, x, strict=True)}

    def residuals(self, x: Sequence[float]) -> list[float]:
        errors = _errors(self.measured, self.cluster, _efficiency(self.base, self.point(x)))
        # A faint pull towards the calibrated model: where the measurements fit equally well along a
        # direction they do not constrain (two plans, three factors), the fit stays nearest to it.
        return [math.log1p(e) for e in errors] + [_PRIOR * value for value in x]


def fit(measured: Sequence[Measured], cluster: Cluster, base: Efficiency = DEFAULT_EFFICIENCY) -> Calibration:
    """Fit the factors to ``measured`` (at least one plan); raises ValueError on none."""
    if not measured:
        raise ValueError("calibration needs at least one measured plan")
    problem = _Problem(measured, cluster, base)
    point = problem.point(least_squares(problem.residuals, problem.box, problem.starts()))
    fitted = _efficiency(base, point)
    return Calibration(
        factors={name: math.exp(point.get(name, 0.0)) for name in FACTORS},
        efficiency=fitted,
        points=len(measured),
        errors_before=tuple(_errors(measured, cluster, base)),
        errors_after=tuple(_errors(measured, cluster, fitted)),
        micro_batch_overhead_s=point.get(OVERHEAD, 0.0),
        added_layer_overhead_s=point.get(BLOCK_OVERHEAD, 0.0),
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
