"""``osprey simulate --history FILE|registry``: a scheduler's own record of past jobs replayed through its model,
natively and with Osprey, over seeds (docs/history.md). The output is ``osprey simulate``'s: its table (the
seeds' means), then the spread over the seeds and the record's notes; ``--json`` one object per scheduler with
``history``, ``seeds`` and ``spread``; ``--plot`` the same PNGs (the first seed's time series and CDF)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from osprey.cli.errors import guarded
from osprey.cli.simulate import render_table, write_plots
from osprey.cli.simulate_workload import fail, usage
from osprey.cli.target import resolve_target
from osprey.simulate import SimulationError
from osprey.simulate.history import (
    HistoryError,
    Replay,
    SchedulerRecord,
    read_history,
    read_registry,
    replay_record,
)
from osprey_control.policy import PriorityDerivationPolicy

__all__: list[str] = []


def _history_records(history: str, **target: str | int | None) -> list[SchedulerRecord]:
    """The record(s) ``--history`` names: a file (one record), or ``registry`` (one per backend in it)."""
    if history != "registry":
        return [read_history(Path(history))]
    with guarded():
        found = resolve_target(**target)  # type: ignore[arg-type]
        records = read_registry(found.registry(), f"registry {found.table_name}")
    if not records:
        raise HistoryError(f"registry {found.table_name}: nothing to replay: the registry holds no jobs")
    return records


def _spread(replay: Replay, console: Console) -> None:
    seeds = replay.seeds
    table = Table(
        title=f"spread over seeds {seeds[0]}-{seeds[-1]} (min-max): startup, utilization, queued jobs' run times",
        box=box.SIMPLE_HEAVY,
    )
    table.add_column("scheduler", justify="left")
    shown = (("mean wait (min)", "mean_wait_s", 60, ".1f"), ("p95 wait (min)", "p95_wait_s", 60, ".1f"),
             ("mean JCT (h)", "mean_jct_s", 3600, ".2f"), ("idle %", "idle_pct", 1, ".1f"),
             ("goodput", "goodput", 1, ".3f"), ("fairness", "fairness", 1, ".3f"))  # fmt: skip
    for header, *_ in shown:
        table.add_column(header, justify="right")
    for mean in replay.means:
        spread = replay.spread(mean.scheduler)
        cells = (
            f"{spread[key][0] / unit:{fmt}}-{spread[key][1] / unit:{fmt}}" for _, key, unit, fmt in shown
        )
        table.add_row(mean.scheduler, *cells)
    console.print(table)


def simulate_history(
    history: str, names: list[str] | None, gpus: int | None, seeds: list[int], policy: PriorityDerivationPolicy | None,
    cycle: float | None, as_json: bool, plot_dir: Path | None, target: dict[str, str | int | None],
) -> None:  # fmt: skip
    """``--history``: each record through its scheduler's model, native and +osprey (or ``names``)."""
    if gpus is not None and gpus < 1:
        usage(f"--gpus: must be a positive number of GPUs, got {gpus}")
    try:
        records = _history_records(history, **target)
    except HistoryError as error:
        fail(f"--history: {error}")
    replays: list[Replay] = []
    err = Console(stderr=True)
    runs = sum(len(names or (1, 2)) for _ in records) * len(seeds)
    # One step per simulation (scheduler x seed): a month of a busy cluster takes minutes.
    with Progress(
        TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True, disable=not err.is_terminal,
    ) as progress:  # fmt: skip
        task = progress.add_task("replaying", total=runs)

        def step(name: str, seed: int) -> None:
            progress.update(task, advance=1, description=f"{name} seed {seed}")

        for record in records:
            chosen = names or [record.scheduler, f"{record.scheduler}+osprey"]
            try:
                replays.append(
                    replay_record(record, chosen, seeds, gpus=gpus, policy=policy, cycle_s=cycle, on_run=step)
                )
            except HistoryError as error:
                fail(f"--history: {error}")
            except SimulationError as error:
                fail(f"{'--gpus' if 'nodes' in str(error) else '--history'}: {error}")
    console = Console(width=None if sys.stdout.isatty() else 200)
    for replay in replays:
        if as_json:
            for mean in replay.means:
                typer.echo(json.dumps(replay.to_dict(mean), sort_keys=True))
            continue
        render_table(list(replay.means), console)
        _spread(replay, console)
        for note in replay.workload.notes:
            typer.echo(note)
    if plot_dir is not None:
        for replay in replays:
            write_plots(
                list(replay.means), plot_dir, f"{replay.workload.name} on {replay.workload.total_gpus} GPUs"
            )
