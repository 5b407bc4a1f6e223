"""The job's measured plans: the step time the plan step last measured for each plan the job has run.

Calibration needs several measured plans to tell compute from communication (one plan fixes one factor,
:mod:`osprey_control.planner.calibrate`). A job that re-plans runs several, one after the other, so the plan
step keeps what it measured on the job's plan request item (:mod:`osprey_control.planner.request`):

    measured   M: "tp,pp,dp,micro_batch,virtual[|node order]" -> M {"step_time_s": N, "at": S}

one entry per plan *and node order* (the key is :func:`~osprey_control.planner.order.plan_key`; the latest
measurement replaces the earlier one), at most :data:`MAX_MEASURED_PLANS`, the oldest dropped first. A job that
moved a straggler off its critical stage keeps both measurements, the plan in rank order and placed: the fit
evaluates each in the node order it ran, so the straggler's cost is not taken for slow compute. Every plan is measured under the request's model options (the job's ``config``), so the
entries are comparable. Pure Python; the plan step writes the attribute (``PlanItems.mark_planned``).

Decision: an entry that cannot be read (a hand-edited item) is skipped, not an error: it only costs the fit a
point, while refusing the request would stop the job's planning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osprey_control.planner.order import parse_plan_key, plan_key
from osprey_control.planner.plan import Plan

__all__ = ["MeasuredStep", "history_item", "with_measurement"]

MEASURED_ATTRIBUTE = "measured"
# Enough for the four calibrated terms with room to spare, small enough to keep the item far below 400 KB.
MAX_MEASURED_PLANS = 8


@dataclass(frozen=True, slots=True)
class MeasuredStep:
    """One plan the job ran, in the node order ``stage_nodes`` (() for rank order), the step time measured on
    it, and when (``%Y-%m-%dT%H:%M:%SZ``)."""

    plan: Plan
    step_time_s: float
    at: str
    stage_nodes: tuple[tuple[int, ...], ...] = ()

    @property
    def key(self) -> str:
        return plan_key(self.plan, self.stage_nodes)


def _entry(key: str, value: Any) -> MeasuredStep | None:
    try:
        plan, stage_nodes = parse_plan_key(key)
        fields = value["M"]
        seconds = float(fields["step_time_s"]["N"])
        at = str(fields["at"]["S"])
    except (ValueError, KeyError, TypeError):
        return None
    if not math.isfinite(seconds) or seconds <= 0:
        return None
    return MeasuredStep(plan, seconds, at, stage_nodes)


def history_from_item(item: Mapping[str, Any]) -> tuple[MeasuredStep, ...]:
    """The measured plans of a plan request item, oldest first (unreadable entries skipped)."""
    attribute = item.get(MEASURED_ATTRIBUTE)
    entries = attribute.get("M") if isinstance(attribute, Mapping) else None
    if not isinstance(entries, Mapping):
        return ()
    found = (_entry(str(key), value) for key, value in entries.items())
    return tuple(sorted((entry for entry in found if entry is not None), key=lambda e: (e.at, e.key)))


def with_measurement(history: Sequence[MeasuredStep], latest: MeasuredStep) -> tuple[MeasuredStep, ...]:
    """``history`` with ``latest`` replacing its plan's entry, the oldest dropped beyond the limit."""
    kept = [entry for entry in history if entry.key != latest.key]
    return (*kept, latest)[-MAX_MEASURED_PLANS:]


def history_item(history: Sequence[MeasuredStep]) -> dict[str, Any]:
    """The ``measured`` attribute value (DynamoDB wire format) holding ``history``."""
    return {
        "M": {
            entry.key: {"M": {"step_time_s": {"N": repr(entry.step_time_s)}, "at": {"S": entry.at}}}
            for entry in history
        }
    }
