"""What the plan step measured for one job, as a :class:`~osprey_control.planner.replan.Measurement`.

Signals (all from the in-job runtime, ``osprey.runtime``, of the job's lead host in ``/aws/osprey``: the
runtime prints them from the lead process only):

- ``InterconnectLatencyMicroseconds`` (a tiny ``all_reduce``): the lead's value is the cost model's
  per-message network latency (``network_latency_us``). The all-reduce completes on every rank at once, so
  the lead's measurement is the job's. An approximation: the cost model's latency is one hop, a tiny
  all-reduce is a few hops, so this errs towards a slower network (never towards zero).
- ``StepTimeSeconds`` (``report_step_time``, which a job that asks to be re-planned calls): nothing publishes
  the available network bandwidth, so it is inferred from the step time: the effective per-node bandwidth at
  which the cost model predicts the measured step time for the current plan (bisection; the prediction falls
  as bandwidth rises). A step within ``tolerance`` (5%) of the
  prediction at nominal bandwidth keeps the nominal bandwidth (the model's own error is about 3%); a step
  slower than predicted even at ``min_bandwidth_fraction`` (1%) of nominal is not the network's doing (GPU or
  input-pipeline slowdown, which re-planning cannot fix) and also keeps the nominal bandwidth.
- ``SlowestNodeSpeed`` / ``SlowestNodeIndex`` (``report_node_speeds``: every rank's compute time, gathered,
  the lead reports the slowest node): the speed factors, that node's GPUs at its speed and the rest nominal.
  A speed of 0.98 or more is noise and keeps all nominal. A job that reports every node's speed with its
  progress (the request's ``node_speeds``, :mod:`.speeds`) is read from that instead, so several slow nodes
  are each placed. The slow nodes are also part of the cluster the bandwidth is inferred on, so their
  slowdown is not taken for the network's.
- calibration: when the step time is faster than predicted, or slower than the network can explain, the
  measured plan calibrates the model instead: the ``compute`` factor of
  :func:`~osprey_control.planner.calibrate.fit` (one measured plan fixes one factor), and the search
  re-ranks with the fitted efficiency. A job that has run other plans (the request's ``measured``,
  :mod:`osprey_control.planner.history`) is fitted on all of them, every factor the points can tell apart,
  whenever the network does not explain its step. Only once the job has run its current plan for its
  interval (``settled``): the latest one-minute step time may otherwise still average in the previous plan.
  The ``calibration`` signal reports the compute factor and the fit's error.

A missing signal keeps the nominal value and says so in the job's ``signals`` (never zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from osprey_control.planner.calibrate import Calibration, Measured, fit
from osprey_control.planner.costmodel import Efficiency, evaluate
from osprey_control.planner.hardware import Cluster
from osprey_control.planner.order import plan_key
from osprey_control.planner.placement import running, speed_factors_with_slow_node
from osprey_control.planner.replan import Measurement
from osprey_control.planner.request import PlanRequest
from osprey_control.planner.speeds import STRAGGLER_SPEED, slow_node_factors
from osprey_control.wiring import INTERCONNECT_LATENCY_METRIC, SLOWEST_NODE_SPEED_METRIC, STEP_TIME_METRIC

__all__ = ["DEFAULT_TOLERANCE", "Observed", "measure", "settled"]

DEFAULT_TOLERANCE = 0.05
DEFAULT_MIN_BANDWIDTH_FRACTION = 0.01
_BISECTION_STEPS = 40


@dataclass(frozen=True, slots=True)
class Observed:
    """The lead host's latest datapoint of each signal (None: no datapoint); ``missing`` says why."""

    latency_us: float | None = None
    step_time_s: float | None = None
    slowest_node_speed: float | None = None
    slowest_node_index: float | None = None
    missing: str = ""


@dataclass(frozen=True, slots=True)
class Signal:
    """One measured input: ``value`` None is the nominal value; ``source`` and ``note`` say where it came from."""

    value: float | None
    source: str
    note: str = ""
    missing: bool = False  # the metric had no datapoint (as opposed to a measurement that matched nominal)

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "note": self.note, "missing": self.missing}


def _valid(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) and value >= 0 else None


def _step_time(
    request: PlanRequest,
    latency_us: float | None,
    network_gbits: float | None,
    nominal: Cluster | None = None,
) -> float:
    base = nominal or request.cluster
    observed = base.with_changes(network_gbits=network_gbits, network_latency_us=latency_us)
    # In the node order the job runs: a straggler on its critical stage is in the step it measured.
    order = running(observed, request.current.pp, request.current_stage_nodes)
    return evaluate(
        request.model,
        observed,
        request.current,
        memory_headroom=request.options.memory_headroom,
        placement=order,
    ).step_time_s


def _bandwidth(
    request: PlanRequest,
    step_time_s: float | None,
    latency_us: float | None,
    *,
    tolerance: float,
    min_fraction: float,
    why_missing: str,
    base: Cluster,
) -> Signal:
    nominal = base.network_gbits
    if step_time_s is None or step_time_s <= 0:
        note = f"no {STEP_TIME_METRIC} datapoint{why_missing}; nominal {nominal:g} Gb/s kept"
        return Signal(None, "nominal", note, missing=True)
    predicted = _step_time(request, latency_us, None, base)
    if step_time_s <= predicted * (1.0 + tolerance):
        note = (
            f"step {step_time_s:.3g} s is within {tolerance:.0%} of the {predicted:.3g} s predicted at the nominal "
            f"{nominal:g} Gb/s"
        )
        return Signal(None, "nominal", note)
    low = nominal * min_fraction
    if _step_time(request, latency_us, low, base) < step_time_s:
        note = (
            f"step {step_time_s:.3g} s is slower than predicted even at {low:g} Gb/s: not the network (a GPU or "
            f"input slowdown re-planning cannot fix); nominal {nominal:g} Gb/s kept"
        )
        return Signal(None, "nominal", note)
    # step_time(low) >= measured > step_time(high): bisect in log space.
    lo, hi = math.log(low), math.log(nominal)
    for _ in range(_BISECTION_STEPS):
        middle = (lo + hi) / 2.0
        if _step_time(request, latency_us, math.exp(middle), base) > step_time_s:
            lo = middle
        else:
            hi = middle
    value = math.exp(hi)
    note = f"the bandwidth at which the cost model predicts the measured step {step_time_s:.3g} s ({predicted:.3g} s at nominal)"
    return Signal(value, STEP_TIME_METRIC, note)


def measure(
    request: PlanRequest,
    observed: Observed,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    min_bandwidth_fraction: float = DEFAULT_MIN_BANDWIDTH_FRACTION,
) -> tuple[Measurement, dict[str, Signal]]:
    """The measurement to re-plan with at the request's step, and how each input was obtained."""
    why = f" ({observed.missing})" if observed.missing else " in the window"
    latency_value = _valid(observed.latency_us)
    if latency_value is None:
        nominal = request.cluster.network_latency_us
        note = f"no {INTERCONNECT_LATENCY_METRIC} datapoint{why}; nominal {nominal:g} µs kept"
        latency = Signal(None, "nominal", note, missing=True)
    else:
        latency = Signal(latency_value, INTERCONNECT_LATENCY_METRIC, "the lead host's")
    speeds, base = _speeds(request, observed, why)
    bandwidth = _bandwidth(
        request,
        _valid(observed.step_time_s),
        latency.value,
        tolerance=tolerance,
        min_fraction=min_bandwidth_fraction,
        why_missing=why,
        base=base,
    )
    calibration, efficiency = _calibration(
        request, observed, bandwidth=bandwidth, latency_us=latency.value, base=base, tolerance=tolerance
    )
    signals = {
        "network_latency_us": latency,
        "network_gbits": bandwidth,
        "speed_factors": speeds,
        "calibration": calibration,
    }
    measurement = Measurement(
        step=request.step,
        network_gbits=bandwidth.value,
        network_latency_us=latency.value,
        speed_factors=base.speed_factors or None,
        efficiency=efficiency,
    )
    return measurement, signals


def _speeds(request: PlanRequest, observed: Observed, why: str) -> tuple[Signal, Cluster]:
    """The straggler signal as per-GPU speed factors on the request's cluster: every node's speed when the
    job reported them with its progress, else the slowest node's metric."""
    cluster = request.cluster
    reported = request.node_speeds
    if reported and len(reported) == cluster.nodes:
        slow = [(node, speed) for node, speed in enumerate(reported) if speed < STRAGGLER_SPEED]
        if not slow:
            note = f"every node within {1 - STRAGGLER_SPEED:.0%} of the median rank (node_speeds): all GPUs nominal"
            return Signal(None, "nominal", note), cluster
        factors = slow_node_factors(reported, cluster.gpus_per_node)
        named = ", ".join(f"{node} at {speed:.3f}" for node, speed in slow)
        note = f"slow nodes (node_speeds, with the job's progress): {named}; their GPUs get those speeds"
        return Signal(min(s for _, s in slow), "node_speeds", note), cluster.with_changes(
            speed_factors=factors
        )
    unmatched = (
        f"node_speeds lists {len(reported)} nodes, the plan's cluster has {cluster.nodes}; "
        if reported
        else ""
    )
    speed, index = _valid(observed.slowest_node_speed), _valid(observed.slowest_node_index)
    if speed is None or index is None:
        # Optional (a job need not report node speeds): not counted as missing data.
        note = f"{unmatched}no {SLOWEST_NODE_SPEED_METRIC} datapoint{why} (optional, report_node_speeds); all GPUs nominal"
        return Signal(None, "nominal", note), cluster
    node = int(index)
    if speed >= STRAGGLER_SPEED or node >= cluster.nodes:
        note = f"slowest node {node} at {speed:.3f} of the median rank: within noise, all GPUs nominal"
        if node >= cluster.nodes:
            note = f"slowest node {node} is not one of the plan's {cluster.nodes} nodes; all GPUs nominal"
        return Signal(None, "nominal", note), cluster
    factors = speed_factors_with_slow_node(cluster, node, speed)
    note = f"node {node} runs at {speed:.3f} of the median rank; its GPUs get that speed"
    return Signal(speed, SLOWEST_NODE_SPEED_METRIC, note), cluster.with_changes(speed_factors=factors)


def settled(request: PlanRequest) -> bool:
    """Whether the job has run its current plan for its interval: only then is the latest step time (a
    one-minute average) the current plan's alone, fit to calibrate on and to keep in its history."""
    return request.step - request.since_step >= request.interval


def _calibration(
    request: PlanRequest,
    observed: Observed,
    *,
    bandwidth: Signal,
    latency_us: float | None,
    base: Cluster,
    tolerance: float,
) -> tuple[Signal, Efficiency | None]:
    """Fit the compute factor to the measured step when the network does not explain the difference."""
    step = _valid(observed.step_time_s)
    if step is None or step <= 0:
        return Signal(None, "nominal", "no step time: the calibrated model is used as is"), None
    if not settled(request):
        note = (
            f"the current plan has run {request.step - request.since_step} steps, fewer than the job's interval "
            f"({request.interval}): its step time may still mix in the previous plan's; not calibrated yet"
        )
        return Signal(None, "nominal", note), None
    if bandwidth.value is not None:
        return Signal(None, "nominal", "the step time is explained by the network: not calibrated"), None
    cluster = base.with_changes(network_latency_us=latency_us)
    # The job's other measured plans (a job that re-planned ran several) let the fit tell compute from
    # communication; the current plan's entry is the step just measured.
    running_key = plan_key(request.current, request.current_stage_nodes)
    earlier = [
        Measured(request.model, e.plan, e.step_time_s, e.stage_nodes)
        for e in request.measured
        if e.key != running_key
    ]
    current = Measured(request.model, request.current, step, request.current_stage_nodes)
    calibration = fit([*earlier, current], cluster, request.options.efficiency)
    before, after = calibration.errors_before[-1], calibration.errors_after[-1]
    if abs(before) <= tolerance and not earlier:
        return Signal(
            None, "nominal", f"predicted within {abs(before):.1%} of the measured step: not calibrated"
        ), None
    factor = calibration.factors["compute"]
    if earlier:
        fitted = ", ".join(f"{name} x{value:.3f}" for name, value in calibration.factors.items())
        if calibration.added_costs():
            fitted += f", {calibration.added_costs()}"
        summary = Calibration.summary(calibration.errors_after)
        note = (
            f"{fitted} fitted to the job's {calibration.points} measured plans: this plan's error "
            f"{before:+.1%} -> {after:+.1%}, largest {summary['max_abs_error']:.1%}; the search ranks with "
            "the fitted model"
        )
    else:
        note = (
            f"compute x{factor:.3f} fitted to the measured step {step:.3g} s: error {before:+.1%} -> "
            f"{after:+.1%}; the search ranks with the fitted model"
        )
    return Signal(factor, STEP_TIME_METRIC, note), calibration.efficiency
