"""``osprey report --plot FILE``: one PNG, a column per backend, rows for queue wait, GPUs (allocated, and idle
while others waited, per hour of the row) and priority changes per job-hour, one point per week row; the start
of enforcement is a vertical line. matplotlib is imported only here, lazily, with the Agg backend (as the simulator's plots)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from osprey.report.compute import Report

__all__ = ["plot_report"]


def _pyplot() -> Any:
    import matplotlib  # noqa: PLC0415 - optional dependency, only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def plot_report(report: Report, path: Path) -> Path:
    """Draw ``report`` to ``path`` (PNG); ImportError when matplotlib is not installed."""
    plt = _pyplot()
    columns = max(1, len(report.backends))
    figure, axes = plt.subplots(3, columns, figsize=(5 * columns, 9), squeeze=False, sharex="col")
    for column, backend in enumerate(report.backends):
        # Each row is drawn at its middle: a week split by the start of enforcement gives two points.
        middles = [row.figures.start + (row.figures.end - row.figures.start) / 2 for row in backend.rows]
        waits = [
            (row.figures.mean_wait_s or float("nan")) / 60 for row in backend.rows
        ]  # nan: no job started, no point
        p95s = [(row.figures.p95_wait_s or float("nan")) / 60 for row in backend.rows]
        wait_axes, gpu_axes, change_axes = (axes[row][column] for row in range(3))
        wait_axes.plot(middles, p95s, "s--", label="p95")
        wait_axes.plot(middles, waits, "o-", label="mean")
        wait_axes.set_ylabel("queue wait (min)")
        wait_axes.set_title(backend.backend)
        # Per hour of the row, so that a partial week (the window's first, the current one, or one split by the
        # start of enforcement) compares with a whole one.
        hours = [
            max((row.figures.end - row.figures.start).total_seconds() / 3600, 1e-9) for row in backend.rows
        ]
        allocated = [row.figures.gpu_hours / h for row, h in zip(backend.rows, hours, strict=True)]
        idle = [row.figures.idle_gpu_hours / h for row, h in zip(backend.rows, hours, strict=True)]
        gpu_axes.plot(middles, allocated, "o-", label="allocated")
        gpu_axes.plot(middles, idle, "s--", label="idle while others waited")
        gpu_axes.set_ylabel("GPUs (mean over the row)")
        changes = [row.figures.changes_per_job_hour for row in backend.rows]
        change_axes.plot(middles, [float("nan") if c is None else c for c in changes], "o-")
        change_axes.set_ylabel("priority changes / job-hour")
        change_axes.set_xlabel("week (UTC)")
        for each in (wait_axes, gpu_axes, change_axes):
            each.set_ylim(bottom=0)
            each.grid(alpha=0.3)
            if backend.enforcement_start is not None and report.since < backend.enforcement_start:
                each.axvline(backend.enforcement_start, color="grey", linestyle=":", label="enforcement")
        wait_axes.legend(loc="best", fontsize="small")
        gpu_axes.legend(loc="best", fontsize="small")
    figure.suptitle("Osprey report: an observation, not a controlled experiment", fontsize="medium")
    figure.autofmt_xdate()
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return path
