"""Output of ``osprey plan``: the Rich table of plans (with the options each plan chose and its ranking
score), the description line, the calibration line, the search-space plot, and the exit-1 path when no plan
exists (the reason on stderr)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from osprey_control.planner import Calibration, Evaluation, PlanConfig, SearchResult, no_plan_reason

__all__: list[str] = []


def console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 200)


def fail(lines: list[str]) -> NoReturn:
    for line in lines:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(1)


def _row(rank: str, e: Evaluation) -> list[str]:
    p = e.plan
    return [
        rank,
        str(p.tp),
        str(p.pp),
        str(p.dp),
        str(p.micro_batch),
        str(p.virtual),
        e.recompute,
        "on" if e.sequence_parallel else "off",
        "on" if e.distributed_optimizer else "off",
        e.precision,
        f"{e.step_time_s:.3f}",
        f"{e.tflops_per_gpu:.1f}",
        f"{e.model_flops_utilization:.1%}",
        f"{e.memory_gib_per_gpu:.1f}",
        f"{e.bubble_fraction:.3f}",
        f"{e.compute_s:.2f}",
        f"{e.tp_comm_s:.2f}",
        f"{e.pp_comm_s:.2f}",
        f"{e.bubble_s:.2f}",
        f"{e.dp_exposed_s:.2f}",
        f"{e.score:.4g}",
        "yes" if e.feasible else "NO",
    ]


def _table(title: str, rows: list[tuple[str, Evaluation]]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    headers = (
        "#",
        "TP",
        "PP",
        "DP",
        "MB",
        "V",
        "RECOMPUTE",
        "SP",
        "DIST-OPT",
        "PREC",
        "STEP s",
        "TFLOP/s/GPU",
        "MFU",
        "MEM GiB",
        "BUBBLE",
        "COMPUTE s",
        "TP s",
        "PP s",
        "BUBBLE s",
        "DP s",
        "SCORE tok/$",
        "FITS",
    )
    left = {"#", "FITS", "RECOMPUTE", "SP", "DIST-OPT", "PREC"}
    for header in headers:
        table.add_column(header, justify="left" if header in left else "right", no_wrap=True)
    for rank, evaluation in rows:
        table.add_row(*_row(rank, evaluation))
    return table


# What the SCORE column is (osprey_control.planner.plan.Evaluation.score), printed under every table of plans.
SCORE_NOTE = (
    "SCORE: tokens per dollar of the cluster's GPU-hour price (tokens/s x 3600 / $ per hour), divided by "
    "1 + the idle fraction (exposed communication and pipeline bubbles); higher ranks first."
)


def describe(config: PlanConfig) -> str:
    m, c = config.model, config.cluster
    heads = f"{m.heads} heads" + (f" ({m.kv_heads} KV)" if m.kv_heads not in (None, m.heads) else "")
    mlp = f", {'gated ' if m.gated_mlp else ''}MLP {m.ffn}" if m.gated_mlp or m.ffn != 4 * m.hidden else ""
    return (
        f"{m.params / 1e9:.1f}B parameters ({m.layers} layers, hidden {m.hidden}, {heads}{mlp}, seq {m.seq}, "
        f"global batch {m.global_batch}) on {c.gpus} x {c.gpu.name} "
        f"({c.nodes} nodes of {c.gpus_per_node}, {c.network_gbits:g} Gb/s per node), memory limit "
        f"{c.gpu.memory_gib * config.options.memory_headroom:.1f} GiB per GPU"
    )


def plot_search(result: SearchResult, path: Path, *, title: str, marked: Evaluation | None = None) -> None:
    """Every evaluated plan as throughput against memory per GPU, coloured by pipeline depth; infeasible
    plans hollow, the memory limit dashed, the best plan (and ``marked``) starred."""
    import matplotlib  # noqa: PLC0415 - optional and slow to import: only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    points = result.everything
    figure, axes = plt.subplots(figsize=(9, 6))
    try:
        depths = sorted({e.plan.pp for e in points})
        colours = plt.get_cmap("viridis")
        for index, depth in enumerate(depths):
            colour = colours(index / max(1, len(depths) - 1))
            for feasible in (True, False):
                chosen = [e for e in points if e.plan.pp == depth and e.feasible is feasible]
                if not chosen:
                    continue
                axes.scatter(
                    [e.memory_gib_per_gpu for e in chosen],
                    [e.tflops_per_gpu for e in chosen],
                    s=18,
                    facecolors=colour if feasible else "none",
                    edgecolors=colour,
                    label=f"pp={depth}" if feasible else f"pp={depth}, does not fit",
                )
        if points:
            axes.axvline(points[0].memory_limit_gib, linestyle="--", color="grey", label="memory limit")
        for star, label, star_colour in ((result.best, "best", "red"), (marked, "evaluated", "black")):
            if star is not None:
                axes.scatter(
                    [star.memory_gib_per_gpu],
                    [star.tflops_per_gpu],
                    marker="*",
                    s=220,
                    color=star_colour,
                    label=label,
                )
        axes.set_xscale("log")
        axes.set_xlabel("memory per GPU (GiB, log scale)")
        axes.set_ylabel("predicted TFLOP/s per GPU")
        axes.set_title("\n".join(textwrap.wrap(title, 110)), fontsize=8)
        axes.legend(fontsize=7, loc="best")
        figure.tight_layout()
        figure.savefig(path, dpi=120)
    finally:
        plt.close(figure)


def calibration_line(calibration: Calibration) -> str:
    before = Calibration.summary(calibration.errors_before)
    after = Calibration.summary(calibration.errors_after)
    factors = ", ".join(f"{name} x{value:.2f}" for name, value in calibration.factors.items())
    if calibration.added_costs():
        factors += f", {calibration.added_costs()}"
    return (
        f"calibrated on {calibration.points} measured plan(s): {factors}; step-time error median "
        f"{before['median_abs_error']:.1%} -> {after['median_abs_error']:.1%}, largest "
        f"{before['max_abs_error']:.1%} -> {after['max_abs_error']:.1%}"
    )


def print_search(
    config: PlanConfig,
    result: SearchResult,
    calibration: Calibration | None,
    plot: Path | None,
    as_json: bool,
) -> None:
    """The ranking (table or JSON); exit 1 with the reason when no plan exists."""
    reason = no_plan_reason(config.model, config.cluster, config.options, result)
    if as_json:
        extra = {"calibration": calibration.to_dict()} if calibration is not None else {}
        typer.echo(json.dumps({**result.to_dict(), **extra, **({"reason": reason} if reason else {})}))
    else:
        out = console()
        out.print(describe(config))
        if calibration is not None:
            out.print(calibration_line(calibration))
        if result.candidates:
            title = f"top {len(result.candidates)} of {result.feasible} feasible plans ({result.evaluated} evaluated)"
            if result.best is None:
                title = f"no plan fits in memory; the {len(result.candidates)} needing least memory"
            out.print(_table(title, [(str(i), e) for i, e in enumerate(result.candidates, start=1)]))
            out.print(SCORE_NOTE)
        if plot is not None:
            out.print(f"search space drawn to {plot}")
    if reason:
        fail([reason])


def print_evaluated(
    config: PlanConfig, marked: Evaluation, result: SearchResult, extra: dict[str, Any], as_json: bool
) -> None:
    if as_json:
        typer.echo(json.dumps({"plan": marked.to_dict(), **extra}))
        return
    out = console()
    out.print(describe(config))
    out.print(_table("evaluated plan", [("-", marked)]))
    if not marked.feasible:
        out.print(f"does not fit: {marked.reason}")
    if result.best is not None:
        out.print(_table("planner's best, for comparison", [("1", result.best)]))
    out.print(SCORE_NOTE)
