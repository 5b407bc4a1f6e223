"""``osprey report [--since 7d] [--json] [--plot FILE]``: the measured effect in production, per backend and per
ISO week, from the registry's allocation history and decisions (definitions: docs/report.md; computation:
:mod:`osprey.report`).

Exit codes: 0 with a report; 1 when there is nothing to report (an empty registry, or no job alive since
``--since``: the reason on stderr, no JSON) or the registry cannot be read; 2 for a bad ``--since``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from osprey.cli.errors import TargetError, guarded
from osprey.cli.jobs import console, print_whole
from osprey.cli.target import (
    EndpointOption,
    ProfileOption,
    RegionOption,
    ShardsOption,
    TableOption,
    resolve_target,
)
from osprey.report import OBSERVATION_NOTE, BackendReport, Figures, Report, build_report, parse_since
from osprey.views import human_duration

__all__: list[str] = []


def _check_since(value: str) -> str:
    """Refuse a bad ``--since`` while parsing, so it is a usage error (exit 2) naming the option."""
    try:
        parse_since(value, datetime.now(UTC))
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    return value


def _wait(seconds: float | None) -> str:
    return "-" if seconds is None else human_duration(seconds)


def _gangs(figures: Figures) -> str:
    gangs = figures.gangs
    if not any(gangs[name] for name in ("ready", "serial", "failed")):
        return "-"
    return (
        f"{gangs['ready']} ready ({gangs['ready_in_time']} in time), "
        f"{gangs['serial']} serial, {gangs['failed']} failed"
    )


def _shadow(figures: Figures) -> str:
    if not figures.shadow_decisions:
        return "-"
    return f"{figures.shadow_decisions} ({figures.shadow_order_changes} reorder)"


def _guard(figures: Figures) -> str:
    """``2/10: policy 7, policy-no-yield 1``: pool-cycles stood down of those guarded, then the other orders."""
    if not figures.guard_cycles:
        return "-"
    others = ", ".join(
        f"{order} {count}" for order, count in sorted(figures.guard_orders.items()) if order != "native"
    )
    return f"{figures.guard_stood_down}/{figures.guard_cycles}" + (f": {others}" if others else "")


def _cells(figures: Figures) -> list[str]:
    changes = figures.changes_per_job_hour
    return [
        str(figures.jobs),
        str(figures.started),
        _wait(figures.mean_wait_s),
        _wait(figures.p95_wait_s),
        str(figures.still_waiting),
        f"{figures.gpu_hours:.1f}",
        f"{figures.idle_gpu_hours:.1f}",
        "-" if changes is None else f"{changes:.2f}",
        _gangs(figures),
        _shadow(figures),
        _guard(figures),
    ]


_HEADERS = (
    "JOBS",
    "STARTED",
    "MEAN WAIT",
    "P95 WAIT",
    "WAITING",
    "GPU-H",
    "IDLE GPU-H",
    "PRIO CHANGES/JOB-H",
    "GANGS",
    "SHADOW (REORDER)",
    "GUARD DOWN/CYCLES",
)


def _render_backend(backend: BackendReport) -> None:
    out = console()
    start = backend.enforcement_start
    title = f"{backend.backend}: " + (
        f"enforced since {start:%Y-%m-%d %H:%M} UTC" if start else "not enforced (Osprey only watched)"
    )
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("WEEK", "PERIOD", *_HEADERS):
        table.add_column(header, no_wrap=header not in ("GANGS", "GUARD DOWN/CYCLES"))
    for row in backend.rows:
        table.add_row(row.week, row.period, *_cells(row.figures))
    if backend.before is not None and backend.after is not None:
        table.add_section()
        table.add_row("all", "before", *_cells(backend.before))
        table.add_row("all", "enforced", *_cells(backend.after))
    print_whole(out, table)
    if backend.before is None:
        out.print(f"  comparison: {backend.comparison_note}")


def _render(report: Report, where: str) -> None:
    out = console()
    out.print(
        f"Osprey report, {report.since:%Y-%m-%d %H:%M} to {report.until:%Y-%m-%d %H:%M} UTC ({where}); "
        "weeks are ISO weeks (UTC), definitions in docs/report.md"
    )
    for backend in report.backends:
        _render_backend(backend)
    out.print(OBSERVATION_NOTE)


def report_command(
    since: Annotated[
        str,
        typer.Option(
            "--since",
            metavar="WHEN",
            callback=_check_since,
            help="The window: a duration (12h, 7d, 2w) or an ISO date or time (2026-11-30).",
        ),
    ] = "7d",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", metavar="FILE", help="Also draw the weekly figures to this PNG.")
    ] = None,
    table: TableOption = None,
    shards: ShardsOption = None,
    profile: ProfileOption = None,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """Queue wait, GPU-hours, idle GPUs, priority churn and gang outcomes per backend and week, before and after
    enforcement."""
    from osprey.report import read_snapshot  # noqa: PLC0415 - boto3 and the registry only when run

    now = datetime.now(UTC)
    with guarded():
        start = parse_since(since, now)
        target = resolve_target(
            table=table, shards=shards, profile=profile, region=region, endpoint_url=endpoint_url
        )
        snapshot = read_snapshot(target.registry(), now)
        if not snapshot.jobs:
            raise TargetError(
                f"nothing to report: the registry ({target.description}) holds no jobs yet; a job is recorded "
                "once it opts in and its first event or discovery reaches Osprey"
            )
        report = build_report(snapshot, start)
        if not report.backends:
            raise TargetError(
                f"nothing to report: none of the registry's {len(snapshot.jobs)} job(s) was alive since "
                f"{start:%Y-%m-%d %H:%M} UTC; widen --since"
            )
        if plot is not None:
            from osprey.report.plot import plot_report  # noqa: PLC0415 - matplotlib only for --plot

            try:
                plot_report(report, plot)
            except ImportError:
                raise TargetError("--plot needs matplotlib: pip install 'osprey-aws[plot]'") from None
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    _render(report, target.description)
    if plot is not None:
        typer.echo(f"plot: {plot}")
