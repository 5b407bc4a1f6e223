"""``osprey jobs`` and ``osprey explain JOB``: what a deployed control plane knows, like Slurm's squeue/sprio.

Both show the priority Osprey derived and the one its backend holds (``applied``), with the reason when the
apply step could not write it (``apply``: applied, pending, ``retrying n/N``, failed, gave-up), and the state of
a co-scheduled job's gang watch (``gang``, the registry item ``sk = GANG``; docs/gangs.md).

The registry table is found from ``--table``, else ``OSPREY_TABLE_NAME``, else the ``/osprey/config`` SSM
parameter the stack writes (``{"tableName": ...}``). Exit 1 when the job or table cannot be found.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from osprey.cli.render import gang_cell, gang_details, gang_line, rules_table
from osprey_control.gang.decision import GangState
from osprey_control.gang.store import GangStore
from osprey_control.registry import (
    ACTIVE_STATUSES,
    MAX_TRANSIENT_APPLY_ATTEMPTS,
    JobKey,
    JobRecord,
)
from osprey_control.wiring import CONFIG_PARAMETER, TABLE_NAME_VARIABLE

__all__ = ["explain_command", "jobs_command"]


TableOption = Annotated[
    str | None, typer.Option("--table", help="Registry table (default: OSPREY_TABLE_NAME or /osprey/config).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 160)


def _table_name(table: str | None) -> str:
    if table:
        return table
    if os.environ.get(TABLE_NAME_VARIABLE):
        return os.environ[TABLE_NAME_VARIABLE]
    from osprey_control.aws import client_for  # noqa: PLC0415 - only when no table was named

    try:
        raw = client_for("ssm").get_parameter(Name=CONFIG_PARAMETER)["Parameter"]["Value"]
        return str(json.loads(raw)["tableName"])
    except Exception as error:
        typer.echo(
            f"error: cannot find the registry table ({type(error).__name__}: {error}); pass --table or set "
            f"OSPREY_TABLE_NAME, or deploy the stack (it writes {CONFIG_PARAMETER})",
            err=True,
        )
        raise typer.Exit(1) from None


def _registry(table: str | None) -> Any:
    from osprey_control.registry.dynamodb import JobRegistry  # noqa: PLC0415 - boto3 only for these commands

    return JobRegistry(_table_name(table))


def _apply_state(record: JobRecord) -> str:
    """Where the derived priority stands on the backend: applied, pending, retrying, failed or gave-up."""
    if record.derived_priority is None:
        return "-"
    if record.derived_priority == record.applied_priority:
        return "applied"
    failure = record.apply_failure
    if failure is None or failure.priority != record.derived_priority:
        return "pending"
    if failure.permanent:
        return "failed"
    if record.apply_pending():
        return f"retrying {failure.attempts}/{MAX_TRANSIENT_APPLY_ATTEMPTS}"
    return "gave-up"


def _summary(record: JobRecord, gang: GangState | None = None) -> dict[str, Any]:
    decision = record.last_decision or {}
    failure = record.apply_failure
    return {
        "key": str(record.key),
        "backend": record.backend.value,
        "name": record.name,
        "policy": record.policy,
        "status": record.status.value,
        # The priority Osprey decided, and the one the backend holds (they differ while an apply is pending).
        "priority": record.derived_priority,
        "applied": record.applied_priority,
        "applied_at": record.applied_at.isoformat() if record.applied_at else None,
        "apply": _apply_state(record),
        "apply_error": failure.reason if failure is not None else None,
        "target": decision.get("target"),
        "reason": decision.get("reason"),
        "last_change": record.last_changed_at.isoformat() if record.last_changed_at else None,
        # The job block's co_schedule: on, off, or left to the policy's coScheduling.
        "co_schedule": "on"
        if record.block.co_schedule
        else ("policy" if record.block.co_schedule is None else "off"),
        "gang": gang_details(gang),
        "nodes": len(record.nodes),
    }


def jobs_command(table: TableOption = None, as_json: JsonOption = False) -> None:
    """List the active jobs Osprey manages, highest priority first.

    GANG is the gang watch of a co-scheduled job: ``ready 20s`` (formed, after 20 s), ``waiting 2/4`` (workers
    ready/requested), ``requeued #1``, ``serial``, ``failed``, ``ended``; ``-`` without a watch. JSON rows:
    key, backend, name, policy, status, priority, applied, applied_at, apply, apply_error, target, reason,
    last_change, co_schedule (on/off/policy), gang (null, or phase, summary, attempt, requeues, ready_workers,
    requested_workers, wait_seconds, ready_in_time, reason, watch_started_at, attempt_started_at, ready_at,
    resume_at), nodes.
    """
    registry = _registry(table)
    records = sorted(
        registry.list_active(),
        key=lambda r: (-(r.derived_priority if r.derived_priority is not None else -1), r.name),
    )
    gangs = GangStore(registry.table_name, registry.client).load_many(record.key for record in records)
    rows = [_summary(record, gangs.get(record.key)) for record in records]
    if as_json:
        typer.echo(json.dumps(rows))
        return
    view = Table(box=box.SIMPLE_HEAD, title=f"{len(rows)} active job(s)", title_justify="left")
    cells = [gang_cell(gangs.get(record.key)) for record in records]
    for header in (
        "JOB",
        "BACKEND",
        "POLICY",
        "STATUS",
        "PRIORITY",
        "APPLIED",
        "APPLY",
        "TARGET",
        "REASON",
        "LAST CHANGE",
    ):
        view.add_column(header, no_wrap=True)
    # The last column is the first rich shrinks when the table is wider than the console: keep it whole.
    view.add_column("GANG", no_wrap=True, min_width=max((len(cell) for cell in cells), default=4))
    for cell, row in zip(cells, rows, strict=True):
        target = "-" if row["target"] is None else f"{row['target']:.1f}"
        view.add_row(
            escape(row["name"]),
            row["backend"],
            row["policy"],
            row["status"],
            "-" if row["priority"] is None else str(row["priority"]),
            "-" if row["applied"] is None else str(row["applied"]),
            row["apply"],
            target,
            row["reason"] or "-",
            row["last_change"] or "-",
            cell,
        )
    _console().print(view)
    for row in rows:
        if row["apply"] not in ("applied", "pending", "-"):
            _console().print(escape(f"{row['name']}: {row['apply']}: {row['apply_error']}"))


def _parse_key(job: str) -> JobKey | None:
    try:
        return JobKey.parse(job)
    except ValueError:
        return None  # a name, not a key: the caller looks it up by name


def _find(registry: Any, job: str) -> JobRecord | None:
    key = _parse_key(job)
    if key is not None:
        found: JobRecord | None = registry.get(key)
        return found
    matches = [r for r in registry.list_active() if job in (r.native_id, r.name)]
    if len(matches) > 1:
        keys = ", ".join(str(r.key) for r in matches)
        typer.echo(f"error: {job!r} matches several jobs ({keys}); name one as BACKEND#ID", err=True)
        raise typer.Exit(1)
    return matches[0] if matches else None


def explain_command(
    job: Annotated[str, typer.Argument(help="Job name, native id, or BACKEND#ID (e.g. batch#a1b2...).")],
    table: TableOption = None,
    as_json: JsonOption = False,
) -> None:
    """Explain a job's last decision rule by rule, and the state of its gang watch.

    JSON: the ``osprey jobs --json`` row and ``decision`` (the stored decision with its rules).
    """
    registry = _registry(table)
    record = _find(registry, job)
    if record is None:
        typer.echo(f"error: no job {job!r} in the registry (finished jobs need BACKEND#ID)", err=True)
        raise typer.Exit(1)
    gang, _ = GangStore(registry.table_name, client=registry.client).load(record.key)
    decision = record.last_decision
    if as_json:
        typer.echo(json.dumps({**_summary(record, gang), "decision": decision}))
        return
    console = _console()
    console.print(escape(f"{record.key} · policy {record.policy} · {record.status.value}"))
    if gang is not None:
        console.print(escape(gang_line(gang)))
    if not decision:
        console.print("no decision yet: the job has not been through a cycle")
        return
    rules = rules_table(decision.get("rules", []))

    def number(value: Any, digits: int = 2) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    console.print(rules)
    console.print(
        f"previous {decision['previous']} → priority {decision['priority']} "
        f"(base {number(decision.get('base'))}, target {number(decision.get('target'))}, {decision['reason']})"
    )
    state = _apply_state(record)
    if state == "applied":
        applied = f"applied {record.applied_priority} at {record.applied_at or '-'}"
    else:
        holds = "nothing yet" if record.applied_priority is None else str(record.applied_priority)
        applied = f"derived {record.derived_priority}, backend holds {holds} ({state})"
        if record.apply_failure is not None:
            applied += f": {record.apply_failure.reason}"
    console.print(escape(applied))
    active = "active" if record.status in ACTIVE_STATUSES else "finished"
    console.print(f"job is {active}; last change {record.last_changed_at or '-'}")
