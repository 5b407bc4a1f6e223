"""``osprey simulate``: replay a workload on a simulated cluster under several schedulers and compare them.

The ``<backend>+osprey`` schedulers are the backend models with Osprey layered on them: the production
derivation engine, appliers' mappings and gang watch (docs/scheduling.md). Output: a table in which each
layered scheduler shows its ratio to its native one, each column says which way is better (↓ lower, ↑ higher)
and a cell where Osprey does worse than the native scheduler is marked ✗ (and listed under the table; a
difference under 0.5% is not a loss); ``fairness`` is Jain's index over teams (share identifiers) of GPU-time
received / entitled while queued (:mod:`osprey.simulate.fairness`); ``--json`` prints one JSON object per
scheduler, one per line, with ``fairness`` and ``teams`` (per team: ``mean_wait_s``, ``gpu_hours``, ...);
``--plot DIR`` writes PNGs (queue length and utilization over time, CDF of queueing delay). Exit 1 on
invalid input, naming the flag and what it allows.

``--history FILE|registry`` replays a scheduler's own record of past jobs (docs/history.md) through that
scheduler's model natively and with Osprey, over ``--seeds`` seeds: the table shows the seeds' means, a second
table each figure's spread (min-max), and the notes how many jobs were finished, running or queued at the
record's end and where the cluster's size came from; ``--json`` adds ``history``, ``seeds`` and ``spread``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from osprey.cli.simulate_workload import (
    build_workload,
    fail,
    parse_schedulers,
    usage,
    with_tenants,
)
from osprey.cli.target import EndpointOption, ProfileOption, RegionOption, ShardsOption, TableOption
from osprey.simulate import (
    LAYERED_PAIRS,
    SCHEDULERS,
    TENANT_PAIRS,
    TENANT_SCHEDULERS,
    Result,
    SimulationError,
    Workload,
    simulate,
)
from osprey.simulate.history import FORMATS
from osprey_control.policy import PriorityDerivationPolicy, load_policy_files

__all__: list[str] = []


def _load_policy(path: Path) -> PriorityDerivationPolicy:
    if not path.is_file():
        usage(f"--policy: cannot read {path}: no such file")
    result = load_policy_files([path])
    if result.errors:
        for error in result.errors:
            typer.echo(f"error: --policy: {error}", err=True)
        raise typer.Exit(1)
    policies = [loaded.policy for loaded in result.policies]
    if len(policies) != 1:
        fail(f"--policy: {path} must hold exactly one policy, found {len(policies)}")
    return policies[0]


def _ratio(value: float, reference: float) -> str:
    if reference == 0:
        return "-" if value == 0 else "inf"
    return f"{value / reference:.2f}x"


@dataclass(frozen=True)
class _Column:
    header: str
    value: Callable[[Result], float]
    fmt: str
    lower_is_better: bool


# Which way is better, per column: waits, completion time, idle GPUs, makespan (first submission to last end:
# how long the whole workload took) and preemptions are costs (lower); goodput is the useful fraction of GPU
# time and fairness Jain's index over teams (higher).
_COLUMNS = (
    _Column("mean wait (min)", lambda r: r.mean_wait_s / 60, ".1f", lower_is_better=True),
    _Column("p95 wait (min)", lambda r: r.p95_wait_s / 60, ".1f", lower_is_better=True),
    _Column("first step (min)", lambda r: r.mean_first_step_s / 60, ".1f", lower_is_better=True),
    _Column("mean JCT (h)", lambda r: r.mean_jct_s / 3600, ".2f", lower_is_better=True),
    _Column("idle %", lambda r: r.idle_pct, ".1f", lower_is_better=True),
    _Column("goodput", lambda r: r.goodput, ".3f", lower_is_better=False),
    _Column("makespan (h)", lambda r: r.makespan_s / 3600, ".2f", lower_is_better=True),
    _Column("preempt", lambda r: float(r.preemptions), ".0f", lower_is_better=True),
    _Column("fairness", lambda r: r.fairness, ".3f", lower_is_better=False),
)
# Differences smaller than this share of the native value are noise, not a loss.
_TOLERANCE = 0.005


def _worse(column: _Column, value: float, reference: float) -> bool:
    margin = abs(reference) * _TOLERANCE
    return value > reference + margin if column.lower_is_better else value < reference - margin


def losses(result: Result, native: Result) -> list[str]:
    """The columns where ``result`` (a ``<backend>+osprey`` scheduler) does worse than its native one."""
    return [
        column.header for column in _COLUMNS if _worse(column, column.value(result), column.value(native))
    ]


def print_results(results: list[Result], built: Workload, *, as_json: bool) -> None:
    """One JSON object per scheduler, or the table with the workload's notes (and, with tenants, the reclaim
    waits) under it."""
    if as_json:
        for result in results:
            typer.echo(json.dumps(result.to_dict(), sort_keys=True))
        return
    render_table(results, Console(width=None if sys.stdout.isatty() else 200))
    for note in built.notes:
        typer.echo(note)
    if built.tenants is not None:
        for line in reclaim_lines(results):
            typer.echo(line)


def reclaim_lines(results: list[Result]) -> list[str]:
    """Per scheduler, each team's p95 reclaim wait (docs/multi-tenant.md), under a tenants table."""
    lines = ["p95 reclaim wait per team (min; jobs that fitted in their team's unused quota when submitted):"]
    for result in results:
        cells = [
            f"{team.team} {'-' if team.p95_reclaim_s is None else f'{team.p95_reclaim_s / 60:.1f}'}"
            for team in result.teams
        ]
        lines.append(f"  {result.scheduler}: {', '.join(cells)}")
    return lines


def render_table(results: list[Result], console: Console) -> None:
    by_name = {r.scheduler: r for r in results}
    natives = {layered: by_name.get(native) for native, layered in (*LAYERED_PAIRS, *TENANT_PAIRS)}
    table = Table(
        title=f"{results[0].workload} on {results[0].gpus} GPUs ({results[0].jobs} jobs)"
        + ("; ratios: <backend>+osprey against <backend>" if any(natives.values()) else ""),
        box=box.SIMPLE_HEAVY,
        caption="↓ lower is better, ↑ higher is better; ✗ marks where Osprey does worse than the native scheduler",
        caption_justify="left",
    )
    table.add_column("scheduler", justify="left")
    for column in _COLUMNS:
        table.add_column(f"{column.header} {'↓' if column.lower_is_better else '↑'}", justify="right")
    table.add_column("prio changes /job-h", justify="right")

    def cell(column: _Column, result: Result, native: Result | None) -> str:
        value = column.value(result)
        text = format(value, column.fmt)
        if native is None:
            return text
        reference = column.value(native)
        ratio = _ratio(value, reference)
        return f"[red]{text} ({ratio}) ✗[/red]" if _worse(column, value, reference) else f"{text} ({ratio})"

    lost: list[str] = []
    for r in results:
        native = natives.get(r.scheduler)
        table.add_row(
            r.scheduler,
            *(cell(column, r, native) for column in _COLUMNS),
            "-" if r.priority_changes_per_job_hour is None else f"{r.priority_changes_per_job_hour:.2f}",
        )
        if native is not None and (worse := losses(r, native)):
            lost.append(f"where Osprey loses: {r.scheduler} against {native.scheduler} on {', '.join(worse)}")
    console.print(table)
    for line in lost:
        console.print(line, markup=False)


def write_plots(results: list[Result], plot_dir: Path, title: str) -> None:
    from osprey.simulate.plots import plot_results  # noqa: PLC0415 - matplotlib only for --plot

    try:
        written = plot_results(results, plot_dir, title=title)
    except ImportError:
        fail("--plot: matplotlib is not installed (pip install 'osprey-aws[plot]')")
    except OSError as error:
        fail(f"--plot: cannot write to {plot_dir}: {error}")
    for path in written:
        typer.echo(f"wrote {path}", err=True)


def simulate_command(
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            help="alibaba, llm, seed (the seed's 64 GPUs, 5 jobs), family:SEED (one draw of the "
            "workload family, docs/scheduling.md) or FILE.csv.",
            show_default="llm",
        ),
    ] = None,
    history: Annotated[
        str | None,
        typer.Option(
            "--history",
            metavar="FILE|registry",
            help=f"Replay a scheduler's record of past jobs ({', '.join(FORMATS)}; format from the content) or "
            "Osprey's registry, natively and with Osprey (docs/history.md).",
            show_default=False,
        ),
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            "--seeds",
            help="--history: how many seeds (from --seed) to spread what the record does not say over.",
            show_default="5",
        ),
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option(
            "--gpus",
            help="Cluster GPUs in 8-GPU nodes (alibaba: default the real node list; --history: the record's peak).",
        ),
    ] = None,
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy", help="Policy of the +osprey schedulers (default policies/default-policy.yaml)."
        ),
    ] = None,
    schedulers: Annotated[
        str | None,
        typer.Option(
            "--schedulers",
            help=f"Comma-separated: {','.join(SCHEDULERS)}; with --tenants also {','.join(TENANT_SCHEDULERS)}.",
            show_default="every one; --history: the record's scheduler and its +osprey",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed for the generator, startup and metrics noise.")
    ] = 0,
    cycle: Annotated[
        float | None, typer.Option("--cycle", help="Osprey's cycle in s (default: the policy's interval).")
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", help="llm: number of jobs.")] = 300,
    load: Annotated[
        float, typer.Option("--load", help="llm: offered load (1.0 = the cluster's capacity).")
    ] = 1.0,
    limit: Annotated[
        int | None, typer.Option("--limit", help="alibaba: replay only the first N tasks.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per scheduler, one per line.")
    ] = False,
    plot_dir: Annotated[
        Path | None, typer.Option("--plot", help="Write PNG plots into this directory.")
    ] = None,
    tenants_file: Annotated[
        Path | None,
        typer.Option(
            "--tenants",
            metavar="FILE.yaml|drawn",
            help="Teams sharing the cluster (quota, borrowing and lending limits, fairShareWeight): fairness is "
            "measured against the quotas and Batch fair share weighs teams by them; 'drawn': quotas drawn for "
            "the workload's teams from --seed (docs/multi-tenant.md).",
        ),
    ] = None,
    table: TableOption = None,
    shards: ShardsOption = None,
    profile: ProfileOption = None,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """Simulate a workload under several schedulers (the +osprey ones run the real engine) and compare."""
    names = parse_schedulers(schedulers, tenants=tenants_file is not None) if schedulers is not None else None
    if cycle is not None and not 1 <= cycle <= 86400:
        usage(f"--cycle: must be between 1 and 86400 seconds, got {cycle}")
    if limit is not None and limit < 1:
        usage(f"--limit: must be at least 1, got {limit}")
    if history is not None and history != "registry" and not Path(history).is_file():
        usage(f"--history: cannot read {history}: no such file (or 'registry' for Osprey's own)")
    if history is not None and workload is not None:
        usage("--history: replays a record instead of --workload; give one of them")
    if history is not None and tenants_file is not None:
        usage("--tenants: only with --workload (a --history record's teams have no quotas to read)")
    if history is None and seeds is not None:
        usage("--seeds: only with --history (--seed picks the one seed of a --workload run)")
    seeds = 5 if seeds is None else seeds
    if not 1 <= seeds <= 100:
        usage(f"--seeds: must be between 1 and 100, got {seeds}")
    policy = _load_policy(policy_file) if policy_file is not None else None
    if history is not None:
        target = {
            "table": table,
            "shards": shards,
            "profile": profile,
            "region": region,
            "endpoint_url": endpoint_url,
        }
        seed_list = list(range(seed, seed + seeds))
        from osprey.cli.simulate_history import simulate_history  # noqa: PLC0415 - it imports this module

        simulate_history(history, names, gpus, seed_list, policy, cycle, as_json, plot_dir, target)
        return
    names = names or [*SCHEDULERS, *(TENANT_SCHEDULERS if tenants_file is not None else ())]
    workload = workload or "llm"
    built = build_workload(workload, gpus, seed, jobs, load, limit)
    if not built.jobs:
        fail(f"--workload: {workload} has no jobs")
    if tenants_file is not None:
        built = with_tenants(built, tenants_file, seed, names)
    err = Console(stderr=True)
    results: list[Result] = []
    with Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        for name in names:
            task = progress.add_task(name, total=len(built.jobs))
            step = max(1, len(built.jobs) // 200)

            def advance(done: int, total: int, task: object = task, step: int = step) -> None:
                if done % step == 0 or done == total:
                    progress.update(task, completed=done)  # type: ignore[arg-type]

            try:
                results.append(
                    simulate(
                        built,
                        name,
                        policy=policy,
                        cycle_s=cycle,
                        seed=seed,
                        on_progress=advance,
                    )
                )
            except SimulationError as error:
                fail(f"--schedulers {name}: {error}")
            progress.update(task, completed=len(built.jobs))
    print_results(results, built, as_json=as_json)
    if plot_dir is not None:
        write_plots(results, plot_dir, f"{built.name} on {built.total_gpus} GPUs")
