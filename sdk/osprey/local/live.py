"""A live Rich view of ``osprey local cycle --live``: progress, then each job's load, priority, backend value and
gang watch."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from osprey.views import load_cell

if TYPE_CHECKING:
    from osprey.local.session import CycleResult

__all__ = ["run_live"]


def _arrow(previous: object, priority: object) -> str:
    if not isinstance(previous, int) or not isinstance(priority, int) or previous == priority:
        return " "
    return "[green]▲[/green]" if priority > previous else "[red]▼[/red]"


def cycle_table(result: CycleResult) -> Table:
    table = Table(
        title=f"cycle {result.execution}: {result.status} (tick {result.tick})", title_justify="left"
    )
    for column, justify in (
        ("job", "left"),
        ("backend", "left"),
        ("load", "left"),
        ("priority", "right"),
        ("target", "right"),
        ("reason", "left"),
        ("on backend", "left"),
        ("gang", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for item in result.decisions:
        target = item["target"]
        share = item.get("share")
        backend_value = str(item.get("onBackend") or "-")
        table.add_row(
            str(item["job"]),
            str(item["backend"]),
            load_cell(item.get("inputs") or {}),
            f"{item['previous']} → {item['priority']} {_arrow(item['previous'], item['priority'])}",
            "-" if target is None else f"{target:.1f}",
            str(item["reason"] or "-"),
            backend_value if share is None else f"{backend_value} ({share:.0%} share)",
            str((item.get("gang") or {}).get("summary") or "-"),
        )
    table.caption = "load: what the rules read. Batch weightFactor: lower gets more of the queue."
    return table


def run_live(
    cycle: Callable[[], CycleResult], count: int, console: Console | None = None
) -> list[CycleResult]:
    """Run ``count`` cycles, redrawing the progress bar and the latest cycle's table after each one."""
    # A console of this call's stdout, not Rich's global one (which keeps the stdout it first saw); piped
    # output gets a width that fits the table instead of Rich's 80 columns.
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    progress = Progress(
        TextColumn("cycles"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )
    task = progress.add_task("cycles", total=count)
    results: list[CycleResult] = []
    with Live(Group(progress), console=console, refresh_per_second=4) as live:
        for _ in range(count):
            result = cycle()
            results.append(result)
            progress.advance(task)
            live.update(Group(progress, cycle_table(result)))
            if result.status != "SUCCEEDED":
                break
    return results
