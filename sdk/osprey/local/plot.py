"""Priorities over cycles for ``osprey local``: every fleet job's priority after each cycle run, as a PNG.

The x-axis counts real cycles: the executions of the deployed cycle state machine, whichever process started
them. The registry records a decision only when it changes something (a new priority or reason:
``DECISION#<time>`` items, :meth:`osprey_control.registry.dynamodb.JobRegistry.history`), so each decision is
placed in the cycle whose execution started last before it was recorded, and a job's priority is carried
forward through the cycles that recorded nothing for it; otherwise a job that settled early would look as if
it had vanished. Cycle 0 is the priority before the first cycle (the policy's ``initialPriority``).

Ten jobs often hold the same priority (all start at 50; idle ones fall together), so each line has its own
marker and line style and is drawn a fraction of a point above or below its true value (at most
:data:`MAX_OFFSET` points, said on the y-axis), and the legend sits to the right of the axes, outside the data.
:func:`plot_series` is exactly what is drawn. matplotlib is the optional ``plot`` extra.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from osprey.local.session import LocalState

__all__ = [
    "PriorityHistory",
    "Series",
    "draw_priorities",
    "per_cycle",
    "plot_priorities",
    "plot_series",
    "priority_history",
]

MAX_DECISIONS = 500
MAX_OFFSET = 1.0  # priority points: visible at 0..100 on a 4.5-inch axis, far below the damping step (10)
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">")
_LINESTYLES = ("-", "--", "-.", ":")


@dataclass(frozen=True)
class PriorityHistory:
    """The start of every cycle run (oldest first) and each job's recorded decisions ``(time, priority)``."""

    cycles: list[datetime]
    decisions: dict[str, list[tuple[datetime, int]]]


@dataclass(frozen=True)
class Series:
    """One drawn line: ``x`` the cycle numbers 0..N, ``y`` the offset priorities, ``priorities`` the true ones."""

    label: str
    x: list[int]
    y: list[float]
    priorities: list[int]
    marker: str
    linestyle: str


def priority_history(state: LocalState) -> PriorityHistory:
    """The cycles the deployed state machine ran and every fleet job's recorded decisions."""
    from osprey.local.fleet import SimulatedFleet  # noqa: PLC0415
    from osprey_control.registry import parse_time  # noqa: PLC0415

    sfn = state.client("stepfunctions")
    starts: list[datetime] = []
    for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=state.state_machine_arn):
        starts.extend(execution["startDate"] for execution in page["executions"])
    fleet = SimulatedFleet(state.client, state.table_name, state.shards)
    decisions: dict[str, list[tuple[datetime, int]]] = {}
    for record in sorted(fleet.registry.list_active(), key=lambda r: r.name):
        items = fleet.registry.history(record.key, limit=MAX_DECISIONS)
        decisions[record.name] = [
            (parse_time(str(item["recorded_at"])), int(item["derived_priority"])) for item in reversed(items)
        ]
    return PriorityHistory(sorted(starts), decisions)


def per_cycle(history: PriorityHistory, *, initial: int = 50) -> dict[str, list[int]]:
    """Each job's priority before the first cycle (``initial``) and after each cycle: ``len(cycles) + 1``
    values, the last decision carried forward; a cycle that recorded several keeps the last."""
    count = len(history.cycles)
    result: dict[str, list[int]] = {}
    for label, decisions in history.decisions.items():
        at_cycle: dict[int, int] = {}
        for when, priority in sorted(decisions, key=lambda decision: decision[0]):
            # The cycle whose execution started last at or before the decision (1-based; a decision stamped
            # a hair before the first start, by another clock, belongs to the first cycle).
            at_cycle[min(max(bisect.bisect_right(history.cycles, when), 1), max(count, 1))] = priority
        values = [initial]
        for cycle in range(1, max(count, max(at_cycle, default=0)) + 1):
            values.append(at_cycle.get(cycle, values[-1]))
        result[label] = values
    return result


def plot_series(priorities: Mapping[str, Sequence[int]]) -> list[Series]:
    """What :func:`plot_priorities` draws: per job, its own marker and line style and a small fixed offset
    (spread evenly over ±:data:`MAX_OFFSET`) so lines with the same values stay visible side by side."""
    labels = list(priorities)
    series: list[Series] = []
    for index, label in enumerate(labels):
        offset = 0.0 if len(labels) == 1 else MAX_OFFSET * (2 * index / (len(labels) - 1) - 1)
        values = list(priorities[label])
        series.append(
            Series(
                label=label,
                x=list(range(len(values))),
                y=[value + offset for value in values],
                priorities=values,
                marker=_MARKERS[index % len(_MARKERS)],
                linestyle=_LINESTYLES[(index // len(_MARKERS) + index) % len(_LINESTYLES)],
            )
        )
    return series


def draw_priorities(priorities: Mapping[str, Sequence[int]]) -> Figure:
    """The figure: one line per job over the cycles (:func:`per_cycle`), the legend outside the axes."""
    import matplotlib  # noqa: PLC0415 - optional and slow to import: only for --plot

    matplotlib.use("Agg")
    from matplotlib import pyplot  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    figure, axes = pyplot.subplots(figsize=(10, 4.5))
    for line in plot_series(priorities):
        axes.plot(
            line.x, line.y, marker=line.marker, linestyle=line.linestyle, markersize=4, label=line.label
        )
    axes.set_xlabel("cycle (0 = before the first)")
    axes.set_ylabel(f"Osprey priority (0..100; lines ±{MAX_OFFSET:g} apart)")
    axes.set_ylim(0, 100)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_title("osprey local: priorities after each cycle")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0.0)
    return figure


def plot_priorities(priorities: Mapping[str, Sequence[int]], path: Path) -> None:
    """Write :func:`draw_priorities` as a PNG (the legend included: ``bbox_inches="tight"``)."""
    from matplotlib import pyplot  # noqa: PLC0415

    figure = draw_priorities(priorities)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    pyplot.close(figure)
