"""``osprey jobs``: the jobs a control plane manages, like Slurm's squeue or ``kubectl get``.

Each row shows the priority Osprey derived and the one its backend holds (APPLIED), with the reason when the
apply step could not write it (APPLY: applied, shadow, pending, retrying n/N, failed, gave-up), the state of a
co-scheduled job's gang watch (GANG, the registry item ``sk = GANG``; docs/gangs.md), how long ago the job was
submitted (AGE) and its priority last changed (CHANGED), in kubectl's units (``42s``, ``7m30s``, ``3h``, ``4d``).

The control plane is found as every command finds it (:mod:`osprey.cli.target`): ``--table``, a running
``osprey local``, or ``/osprey/config`` with the usual AWS profile and region.

Decisions: filters (``--backend``, ``--policy``, ``--status``) repeat and combine with AND across kinds and OR
within one; ``--status`` may name a finished status, but the registry lists active jobs only (its sparse
index), so it filters among those. ``--watch`` clears the screen and redraws every ``--interval`` seconds like
``watch(1)`` when stdout is a terminal, and prints one frame after another otherwise; Ctrl-C ends it with
exit 0, ``--count N`` after N frames.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from osprey.cli.errors import guarded
from osprey.cli.policy_state import invalid_lines, read_invalid_policies
from osprey.cli.target import (
    EndpointOption,
    ProfileOption,
    RegionOption,
    ShardsOption,
    TableOption,
    Target,
    resolve_target,
)
from osprey.views import gang_details, human_duration, policy_cell, policy_fields
from osprey_control.gang import GangState
from osprey_control.gang.store import GangStore
from osprey_control.policy import InvalidPolicy
from osprey_control.registry import MAX_TRANSIENT_APPLY_ATTEMPTS, Backend, JobRecord, JobStatus

__all__: list[str] = []

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


class Output(StrEnum):
    TABLE = "table"
    WIDE = "wide"
    JSON = "json"


def console() -> Console:
    # Piped output keeps full rows rather than wrapping at rich's default 80 columns.
    return Console(width=None if sys.stdout.isatty() else 10_000)


def print_whole(out: Console, table: Table) -> None:
    """Print ``table`` without cutting a cell short: wider than the terminal, it wraps as kubectl's does."""
    needed = Console(width=10_000).measure(table).maximum
    if needed <= out.width:
        out.print(table)
        return
    Console(width=needed, file=out.file, force_terminal=out.is_terminal).print(table)


def apply_state(record: JobRecord) -> str:
    """Where the derived priority stands on the backend: applied, shadow (recorded, not written: shadow mode),
    pending, retrying, failed or gave-up."""
    if record.derived_priority is None:
        return "-"
    if record.derived_priority == record.applied_priority:
        return "applied"
    if record.shadow_priority == record.derived_priority:
        return "shadow"
    failure = record.apply_failure
    if failure is None or failure.priority != record.derived_priority:
        return "pending"
    if failure.permanent:
        return "failed"
    if record.apply_pending():
        return f"retrying {failure.attempts}/{MAX_TRANSIENT_APPLY_ATTEMPTS}"
    return "gave-up"


def _table_name(table: str | None) -> str:
    """The resolved registry table's name (``osprey plan --register-job`` imports this; new code should use
    :func:`osprey.cli.target.resolve_target`, which also gives the endpoint and clients)."""
    with guarded():
        return resolve_target(table=table).table_name


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _since(value: datetime | None, now: datetime) -> float | None:
    return None if value is None else round((now - value).total_seconds(), 3)


def summary(
    record: JobRecord,
    gang: GangState | None = None,
    now: datetime | None = None,
    invalid: Mapping[str, InvalidPolicy] | None = None,
) -> dict[str, Any]:
    """A job's ``osprey jobs --json`` row (keys in :func:`jobs_command`'s help); ``invalid``: the deployed
    policies that are invalid (None: not known)."""
    now = now or datetime.now(UTC)
    decision = record.last_decision or {}
    failure = record.apply_failure
    submitted = record.submitted_at or record.observed_at or record.status_time
    return {
        "key": str(record.key),
        "backend": record.backend.value,
        "name": record.name,
        "policy": record.policy,
        **policy_fields(record.policy, invalid),
        "status": record.status.value,
        # The priority Osprey decided, and the one the backend holds (they differ while an apply is pending).
        "priority": record.derived_priority,
        "applied": record.applied_priority,
        "applied_at": _iso(record.applied_at),
        "apply": apply_state(record),
        "apply_error": failure.reason if failure is not None else None,
        # Shadow mode: the priority the apply step would have written (nothing was), and since when.
        "shadow": record.shadow_priority,
        "shadow_at": _iso(record.shadow_at),
        "target": decision.get("target"),
        "reason": decision.get("reason"),
        "last_change": _iso(record.last_changed_at),
        "submitted_at": _iso(submitted),
        "age_seconds": _since(submitted, now),
        # The job block's co_schedule: on, off, or left to the policy's coScheduling.
        "co_schedule": "on"
        if record.block.co_schedule
        else ("policy" if record.block.co_schedule is None else "off"),
        "gang": gang_details(gang),
        "nodes": len(record.nodes),
        "requested_gpus": record.requested_gpus,
        "queue": record.job_queue or record.cluster,
    }


def _allowed(option: str, values: list[str], allowed: list[str], *, fold: bool = False) -> set[str]:
    """``values`` checked against ``allowed`` (case-insensitively with ``fold``); a bad one is a usage error."""
    canonical = {(value.lower() if fold else value): value for value in allowed}
    chosen: set[str] = set()
    for value in values:
        found = canonical.get(value.lower() if fold else value)
        if found is None:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)}", param_hint=option)
        chosen.add(found)
    return chosen


def list_rows(
    target: Target,
    *,
    backends: set[str] | None = None,
    policies: set[str] | None = None,
    statuses: set[str] | None = None,
    now: datetime | None = None,
    invalid: Mapping[str, InvalidPolicy] | None = None,
) -> list[dict[str, Any]]:
    """The active jobs matching the filters, highest priority first, as ``--json`` rows with their gang and
    their policy's state (``invalid``: the deployed policies that are invalid, None: not known)."""
    registry = target.registry()
    records = [
        record
        for record in registry.list_active()
        if (not backends or record.backend.value in backends)
        and (not policies or record.policy in policies)
        and (not statuses or record.status.value in statuses)
    ]
    records.sort(key=lambda r: (-(r.derived_priority if r.derived_priority is not None else -1), r.name))
    gangs = GangStore(registry.table_name, registry.client).load_many(record.key for record in records)
    return [summary(record, gangs.get(record.key), now, invalid) for record in records]


def stamp(value: datetime | None, now: datetime | None = None) -> str:
    """``2026-12-04 13:50:11 UTC (3s ago)``, or ``-``."""
    if value is None:
        return "-"
    now = now or datetime.now(UTC)
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC ({human_duration(now - value)} ago)"


def _ago(iso: str | None, now: datetime) -> str:
    if iso is None:
        return "-"
    return human_duration(now - datetime.fromisoformat(iso)) + " ago"


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def render_rows(rows: list[dict[str, Any]], title: str, wide: bool, out: Console, now: datetime) -> None:
    view = Table(box=box.SIMPLE_HEAD, title=escape(title), title_justify="left")
    columns = [
        "JOB",
        "BACKEND",
        "POLICY",
        "STATUS",
        "PRIORITY",
        "APPLIED",
        "APPLY",
        "REASON",
        "AGE",
        "CHANGED",
    ]
    if wide:
        columns[1:1] = ["KEY"]
        columns += ["TARGET", "APPLIED AT", "NODES", "GPUS", "QUEUE/CLUSTER", "CO-SCHEDULE"]
    for header in columns:
        numeric = header in {"PRIORITY", "APPLIED", "TARGET", "NODES", "GPUS", "AGE"}
        view.add_column(header, no_wrap=True, justify="right" if numeric else "left")
    cells = [str((row["gang"] or {}).get("summary") or "-") for row in rows]
    # The last column is the first rich shrinks when the table is wider than the console: keep it whole.
    view.add_column("GANG", no_wrap=True, min_width=max((len(cell) for cell in cells), default=4))
    for cell, row in zip(cells, rows, strict=True):
        values = {
            "JOB": escape(row["name"]),
            "KEY": escape(row["key"]),
            "BACKEND": row["backend"],
            "POLICY": escape(policy_cell(row["policy"], row["policy_state"], row["policy_version"])),
            "STATUS": row["status"],
            "PRIORITY": _cell(row["priority"]),
            "APPLIED": _cell(row["applied"]),
            "APPLY": row["apply"],
            "REASON": row["reason"] or "-",
            "AGE": "-" if row["age_seconds"] is None else human_duration(row["age_seconds"]),
            "CHANGED": _ago(row["last_change"], now),
            "TARGET": "-" if row["target"] is None else f"{row['target']:.1f}",
            "APPLIED AT": _ago(row["applied_at"], now),
            "NODES": str(row["nodes"]),
            "GPUS": _cell(row["requested_gpus"]),
            "QUEUE/CLUSTER": escape(str(row["queue"] or "-").rsplit("/", 1)[-1]),
            "CO-SCHEDULE": row["co_schedule"],
        }
        view.add_row(*(values[header] for header in columns), cell)
    print_whole(out, view)
    for row in rows:
        if row["apply"] not in ("applied", "pending", "shadow", "-"):
            out.print(escape(f"{row['name']}: {row['apply']}: {row['apply_error']}"))
    shadowed = sum(1 for row in rows if row["apply"] == "shadow")
    if shadowed:
        out.print(
            f"{shadowed} job(s) in shadow mode: PRIORITY is what Osprey would have written; nothing was "
            "(osprey explain JOB, osprey history JOB)"
        )


def render_invalid(
    rows: list[dict[str, Any]], invalid: Mapping[str, InvalidPolicy] | None, out: Console
) -> None:
    for line in invalid_lines(rows, invalid):
        out.print(escape(line))


def watch(frame: Callable[[int], None], interval: float, count: int, out: Console) -> int:
    """Call ``frame(n)`` every ``interval`` seconds until Ctrl-C, or ``count`` frames (0: no limit); the number
    of frames drawn."""
    drawn = 0
    try:
        while True:
            if out.is_terminal:
                out.clear()
            frame(drawn)
            drawn += 1
            if count and drawn >= count:
                return drawn
            time.sleep(interval)
    except KeyboardInterrupt:
        return drawn


def jobs_command(
    backend: Annotated[
        list[str] | None,
        typer.Option(
            "--backend",
            metavar="BACKEND",
            help=f"Only jobs on this backend ({', '.join(b.value for b in Backend)}).",
            autocompletion=lambda: [b.value for b in Backend],
        ),
    ] = None,
    policy: Annotated[
        list[str] | None, typer.Option("--policy", metavar="NAME", help="Only jobs under this policy.")
    ] = None,
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            metavar="STATUS",
            help=f"Only jobs in this status ({', '.join(s.value for s in JobStatus)}).",
            autocompletion=lambda: [s.value for s in JobStatus],
        ),
    ] = None,
    output: Annotated[
        Output,
        typer.Option("--output", "-o", help="table, wide (more columns) or json.", case_sensitive=False),
    ] = Output.TABLE,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (the same as -o json).")] = False,
    watch_: Annotated[
        bool, typer.Option("--watch", "-w", help="Redraw every --interval seconds until Ctrl-C.")
    ] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval", metavar="SECONDS", min=0.1, max=3600, help="Seconds between --watch redraws."
        ),
    ] = 5.0,
    count: Annotated[
        int,
        typer.Option(
            "--count", metavar="N", min=0, help="With --watch: stop after this many redraws (0: never)."
        ),
    ] = 0,
    table: TableOption = None,
    shards: ShardsOption = None,
    profile: ProfileOption = None,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """List the active jobs Osprey manages, highest priority first.

    APPLY says whether the backend holds the derived priority (applied, pending, retrying n/N, failed,
    gave-up), or "shadow": the job is in shadow mode, and the derived priority was recorded, never written. GANG is a co-scheduled job's gang watch: "ready 20s" (formed after 20 s), "waiting 2/4" (workers
    ready/requested), "requeued #1", "timeout → serial", "timeout → failed", "ended", or "-" without one. AGE
    is the time since submission; CHANGED, since the priority last changed. POLICY says "(invalid: held)"
    when the stored policy is invalid and its jobs keep their last applied priority, "(invalid: last good vN)"
    when they are derived under its last good version N; a line under the table says what is wrong.

    JSON rows: key, backend, name, policy, policy_state (valid, last-good, held; null: policies unreadable),
    policy_version (the last good version in use), policy_error, status, priority, applied, applied_at, apply, apply_error,
    shadow and shadow_at (the would-be priority shadow mode recorded, and since when; null otherwise), target,
    reason, last_change, submitted_at, age_seconds, co_schedule (on/off/policy), gang (null or an object:
    docs/gangs.md), nodes, requested_gpus, queue.
    """
    backends = _allowed("--backend", backend or [], [b.value for b in Backend], fold=True)
    statuses = _allowed("--status", status or [], [s.value for s in JobStatus], fold=True)
    mode = Output.JSON if as_json else output
    out = console()
    with guarded():
        target = resolve_target(
            table=table, shards=shards, profile=profile, region=region, endpoint_url=endpoint_url
        )

        def frame(drawn: int) -> None:
            now = datetime.now(UTC)
            invalid = read_invalid_policies(target)
            rows = list_rows(
                target,
                backends=backends,
                policies=set(policy or []),
                statuses=statuses,
                now=now,
                invalid=invalid,
            )
            if mode is Output.JSON:
                typer.echo(json.dumps(rows))
                return
            title = f"{len(rows)} active job(s) · {target.description}"
            if watch_:
                title = f"every {interval:g}s · {now:%H:%M:%S} · {title}"
            render_rows(rows, title, mode is Output.WIDE, out, now)
            render_invalid(rows, invalid, out)

        if watch_:
            watch(frame, interval, count, out)
        else:
            frame(0)
