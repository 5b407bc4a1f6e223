"""Priorities over time for ``osprey local``: every recorded decision of the fleet's jobs, as a PNG.

The registry keeps each job's decisions (``DECISION#<time>`` items, newest first through
:meth:`osprey_control.registry.dynamodb.JobRegistry.history`), so the plot covers every cycle since ``up``,
whichever process ran it. matplotlib is the optional ``plot`` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from osprey.local.session import LocalState

__all__ = ["plot_priorities", "priority_history"]

MAX_DECISIONS = 500


def priority_history(state: LocalState) -> dict[str, list[int]]:
    """Each fleet job's derived priorities, oldest first, one per cycle that derived it."""
    from osprey.local.fleet import SimulatedFleet  # noqa: PLC0415

    fleet = SimulatedFleet(state.client, state.table_name, state.shards)
    history: dict[str, list[int]] = {}
    for record in sorted(fleet.registry.list_active(), key=lambda r: r.name):
        items = fleet.registry.history(record.key, limit=MAX_DECISIONS)
        history[record.name] = [int(item["derived_priority"]) for item in reversed(items)]
    return history


def plot_priorities(history: dict[str, list[int]], path: Path, *, initial: int = 50) -> None:
    """One line per job: the priority before the first cycle (``initial``) and after each cycle."""
    import matplotlib  # noqa: PLC0415 - optional and slow to import: only for --plot

    matplotlib.use("Agg")
    from matplotlib import pyplot  # noqa: PLC0415

    figure, axes = pyplot.subplots(figsize=(8, 4.5))
    for label, priorities in history.items():
        values = [initial, *priorities]
        axes.plot(range(len(values)), values, marker="o", label=label)
    axes.set_xlabel("cycle")
    axes.set_ylabel("Osprey priority (0..100)")
    axes.set_ylim(0, 100)
    axes.set_title("osprey local: priorities over time")
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
