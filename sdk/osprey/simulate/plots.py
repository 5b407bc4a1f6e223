"""PNG plots of simulation results: queue length and GPU utilization over time, CDF of queueing delay; and
the workload family's scatter of each layered scheduler's wait change against its goodput change.

matplotlib is imported only here, lazily, with the Agg backend (no display needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from osprey.simulate.ledger import Sample
from osprey.simulate.results import Result

__all__ = ["plot_family", "plot_results"]

_BINS = 400  # points per curve: enough to see the shape, small PNGs
# Schedulers often produce identical curves (e.g. fifo and nogang on single-worker jobs): a different dash
# per scheduler keeps the one drawn first visible under the next.
_STYLES = ("-", "--", ":", "-.", (0, (5, 1)), (0, (1, 2, 4, 2)))
# The bench's goodput goal: a layered scheduler keeps at least 0.99 x native's goodput on every draw.
GOODPUT_GOAL_PCT = -1.0


def binned(
    samples: Sequence[Sample], start: float, end: float, bins: int = _BINS
) -> list[tuple[float, int, int]]:
    """(time, queued jobs, training GPUs) at ``bins`` evenly spaced instants (the state then in force)."""
    if not samples or end <= start:
        return []
    out: list[tuple[float, int, int]] = []
    index = 0
    for step in range(bins + 1):
        t = start + (end - start) * step / bins
        while index + 1 < len(samples) and samples[index + 1].time_s <= t:
            index += 1
        point = samples[index]
        out.append((t, point.queued_jobs, point.training_gpus) if point.time_s <= t else (t, 0, 0))
    return out


def _pyplot() -> Any:
    import matplotlib  # noqa: PLC0415 - optional dependency, only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def plot_results(
    results: Sequence[Result], directory: Path, *, title: str, stem: str | None = None
) -> list[Path]:
    """Write ``<stem>-queue.png``, ``-utilization.png`` and ``-wait-cdf.png`` (stem: the workload's name)."""
    plt = _pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    if not results:
        return []
    stem = stem or results[0].workload
    start = min((r.samples[0].time_s for r in results if r.samples), default=0.0)
    end = max((r.samples[-1].time_s for r in results if r.samples), default=1.0)
    hours = 3600.0
    written: list[Path] = []

    def save(figure: Any, name: str) -> None:
        path = directory / f"{stem}-{name}.png"
        figure.tight_layout()
        figure.savefig(path, dpi=80)
        plt.close(figure)
        written.append(path)

    for name, label, column in (("queue", "queued jobs", 1), ("utilization", "GPUs training (%)", 2)):
        figure, axes = plt.subplots(figsize=(8, 3.6))
        for number, result in enumerate(results):
            points = binned(result.samples, start, end)
            scale = 100.0 / result.gpus if column == 2 else 1.0
            axes.step(
                [(p[0] - start) / hours for p in points],
                [p[column] * scale for p in points],
                where="post",
                label=result.scheduler,
                linewidth=1.4,
                linestyle=_STYLES[number % len(_STYLES)],
            )
        axes.set_xlabel("time (h)")
        axes.set_ylabel(label)
        axes.set_title(f"{title}: {label}")
        axes.legend(fontsize=8, ncol=3)
        save(figure, name)

    figure, axes = plt.subplots(figsize=(6, 4))
    for number, result in enumerate(results):
        waits = sorted(w / 60.0 for w in result.waits_s)
        if waits:
            fractions = [(i + 1) / len(waits) for i in range(len(waits))]
            axes.step(
                [0.0, *waits],
                [0.0, *fractions],
                where="post",
                label=result.scheduler,
                linewidth=1.4,
                linestyle=_STYLES[number % len(_STYLES)],
            )
    axes.set_xscale("symlog", linthresh=1.0)
    axes.set_xlabel("queueing delay (min, log scale above 1)")
    axes.set_ylabel("fraction of jobs")
    axes.set_title(f"{title}: queueing delay CDF")
    axes.legend(fontsize=8)
    save(figure, "wait-cdf")
    return written


def plot_family(points: Sequence[tuple[str, float, float]], directory: Path) -> Path:
    """Write ``family-wait-vs-goodput.png``: one point per (pair, family draw), x = the layered scheduler's
    mean wait change against native (%), y = its goodput change (%), a colour per pair and the goodput goal
    (-1 %) as a horizontal line, so a point below the line is a draw where Osprey did harm. The x axis is
    linear within +-100 % and logarithmic beyond: a wait can only fall by 100 %, but rise by far more."""
    plt = _pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(7, 4.5))
    pairs = list(dict.fromkeys(pair for pair, _, _ in points))
    markers = ("o", "s", "^", "D", "v", "P")
    for number, pair in enumerate(pairs):
        mine = [(x, y) for name, x, y in points if name == pair]
        axes.scatter(
            [x for x, _ in mine],
            [y for _, y in mine],
            label=f"{pair} ({len(mine)})",
            marker=markers[number % len(markers)],
            s=22,
            alpha=0.75,
        )
    axes.axhline(GOODPUT_GOAL_PCT, color="red", linewidth=1.0, linestyle="--", label="goodput goal (-1 %)")
    axes.axvline(0.0, color="grey", linewidth=0.6)
    axes.set_xscale("symlog", linthresh=100.0)
    axes.set_xlabel("mean wait change, layered vs native (%)")
    axes.set_ylabel("goodput change, layered vs native (%)")
    axes.set_title("workload family: each draw and pair")
    axes.legend(fontsize=7)
    path = directory / "family-wait-vs-goodput.png"
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path
