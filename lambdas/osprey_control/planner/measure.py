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
- per-GPU speed factors: no per-GPU speed signal is published; always nominal.

A missing signal keeps the nominal value and says so in the job's ``signals`` (never zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from osprey_control.planner.costmodel import evaluate
from osprey_control.planner.replan import Measurement
from osprey_control.planner.request import PlanRequest

__all__ = [
    "DEFAULT_MIN_BANDWIDTH_FRACTION",
    "DEFAULT_TOLERANCE",
    "Observed",
    "Signal",
    "measure",
]

DEFAULT_TOLERANCE = 0.05
DEFAULT_MIN_BANDWIDTH_FRACTION = 0.01
_BISECTION_STEPS = 40


@dataclass(frozen=True, slots=True)
class Observed:
    """The lead host's latest datapoint of each signal (None: no datapoint); ``missing`` says why."""

    latency_us: float | None = None
    step_time_s: float | None = None
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


def _step_time(request: PlanRequest, latency_us: float | None, network_gbits: float | None) -> float:
    observed = request.cluster.with_changes(network_gbits=network_gbits, network_latency_us=latency_us)
    return evaluate(
        request.model, observed, request.current, memory_headroom=request.options.memory_headroom
    ).step_time_s


def _bandwidth(
    request: PlanRequest,
    step_time_s: float | None,
    latency_us: float | None,
    *,
    tolerance: float,
    min_fraction: float,
    why_missing: str,
) -> Signal:
    nominal = request.cluster.network_gbits
    if step_time_s is None or step_time_s <= 0:
        note = f"no StepTimeSeconds datapoint{why_missing}; nominal {nominal:g} Gb/s kept"
        return Signal(None, "nominal", note, missing=True)
    predicted = _step_time(request, latency_us, None)
    if step_time_s <= predicted * (1.0 + tolerance):
        note = (
            f"step {step_time_s:.3g} s is within {tolerance:.0%} of the {predicted:.3g} s predicted at the nominal "
            f"{nominal:g} Gb/s"
        )
        return Signal(None, "nominal", note)
    low = nominal * min_fraction
    if _step_time(request, latency_us, low) < step_time_s:
        note = (
            f"step {step_time_s:.3g} s is slower than predicted even at {low:g} Gb/s: not the network (a GPU or "
            f"input slowdown re-planning cannot fix); nominal {nominal:g} Gb/s kept"
        )
        return Signal(None, "nominal", note)
    # step_time(low) >= measured > step_time(high): bisect in log space.
    lo, hi = math.log(low), math.log(nominal)
    for _ in range(_BISECTION_STEPS):
        middle = (lo + hi) / 2.0
        if _step_time(request, latency_us, math.exp(middle)) > step_time_s:
            lo = middle
        else:
            hi = middle
    value = math.exp(hi)
    note = f"the bandwidth at which the cost model predicts the measured step {step_time_s:.3g} s ({predicted:.3g} s at nominal)"
    return Signal(value, "StepTimeSeconds", note)


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
        note = f"no InterconnectLatencyMicroseconds datapoint{why}; nominal {nominal:g} µs kept"
        latency = Signal(None, "nominal", note, missing=True)
    else:
        latency = Signal(latency_value, "InterconnectLatencyMicroseconds", "the lead host's")
    bandwidth = _bandwidth(
        request,
        _valid(observed.step_time_s),
        latency.value,
        tolerance=tolerance,
        min_fraction=min_bandwidth_fraction,
        why_missing=why,
    )
    signals = {
        "network_latency_us": latency,
        "network_gbits": bandwidth,
        "speed_factors": Signal(None, "nominal", "no per-GPU speed signal is published"),
    }
    measurement = Measurement(
        step=request.step, network_gbits=bandwidth.value, network_latency_us=latency.value
    )
    return measurement, signals
