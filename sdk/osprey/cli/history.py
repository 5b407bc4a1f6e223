"""``osprey history JOB [--since 24h] [--json] [--plot FILE.png]``: how a job's priority moved, like the events of
``kubectl describe``.

One line per event, oldest first: each recorded decision (the derive step writes one when the priority or its
reason changes: inputs, target, priority before and after, reason) and each apply outcome (what reached the
backend, or why it did not; in shadow mode an event ``shadow``: what would have been written, and which setting
made the job shadow). ``--json`` gives every event whole, the decisions with their per-rule explanation
and inputs. ``--plot`` draws the derived, applied and shadow priority over time (needs ``osprey-aws[plot]``). The
registry keeps 14 days of history by default (``osprey:historyRetentionDays``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from osprey.cli.errors import TargetError, UsageError, guarded
from osprey.cli.jobs import console, print_whole, stamp
from osprey.cli.render import dropped_line, rules_table
from osprey.cli.target import (
    EndpointOption,
    ProfileOption,
    RegionOption,
    ShardsOption,
    TableOption,
    find_job,
    resolve_target,
)
from osprey.views import decision_inputs, decision_notes, load_cell

__all__: list[str] = []

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Only events newer than this: a duration (90s, 30m, 24h, 7d) or a time (2026-12-04T10:00:00Z).",
        show_default=False,
    ),
]


def parse_since(value: str | None, now: datetime) -> datetime | None:
    """``24h`` → now - 24 h; an ISO time as it is (UTC unless it says); None → None. :class:`UsageError` (one
    line, exit 2 under :func:`guarded`: a malformed option value) otherwise."""
    if value is None:
        return None
    text = value.strip()
    found = re.fullmatch(r"(\d+)\s*([smhd])", text)
    if found:
        return now - timedelta(seconds=int(found.group(1)) * _UNITS[found.group(2)])
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--since: {value!r} is neither a duration (90s, 30m, 24h, 7d) nor a time (2026-12-04T10:00:00Z)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def history_events(
    decisions: Sequence[Mapping[str, Any]],
    applies: Sequence[Mapping[str, Any]],
    statuses: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Decisions, apply outcomes and the statuses Osprey set itself (a job closed by reconciliation: event
    ``closed``, the reason as its detail) as one list of events, oldest first (the JSON form)."""
    events: list[dict[str, Any]] = []
    for item in decisions:
        decision = dict(item.get("decision") or {})
        events.append(
            {
                "time": item.get("recorded_at"),
                "event": "derived",
                "policy": item.get("policy"),
                "previous": item.get("previous_priority", decision.get("previous")),
                "priority": item.get("derived_priority", decision.get("priority")),
                "target": decision.get("target"),
                "reason": decision.get("reason"),
                "rules": decision.get("rules", []),
                "inputs": decision.get("inputs"),
            }
        )
    for item in applies:
        events.append(
            {
                "time": item.get("recorded_at"),
                "event": str(item.get("outcome", "applied")),
                "priority": item.get("priority"),
                "detail": item.get("detail", ""),
            }
        )
    for item in statuses:
        events.append(
            {
                "time": item.get("recorded_at"),
                "event": "closed",
                "status": item.get("status"),
                "detail": item.get("reason", ""),
            }
        )
    return sorted(events, key=lambda event: (str(event["time"]), event["event"] != "derived"))


def _moment(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def _detail(event: Mapping[str, Any]) -> str:
    if event["event"] != "derived":
        return str(event.get("detail", ""))
    parts = [f"load {load_cell(decision_inputs(event))}"]
    parts.extend(
        f"{signal}: {note}" for signal, note in decision_notes({"inputs": event.get("inputs")}).items()
    )
    dropped = dropped_line(event.get("rules") or [])
    if dropped:
        parts.append(dropped)
    return "; ".join(parts)


def _render(events: Sequence[Mapping[str, Any]], title: str, now: datetime) -> None:
    out = console()
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("TIME", "EVENT", "PRIORITY", "TARGET", "REASON", "DETAIL"):
        table.add_column(header, no_wrap=header not in ("DETAIL",), overflow="fold")
    for event in events:
        moment = _moment(event["time"])
        if event["event"] == "derived":
            priority = f"{event.get('previous', '-')} → {event.get('priority', '-')}"
            target = "-" if event.get("target") is None else f"{float(event['target']):.1f}"
            reason = str(event.get("reason") or "-")
        else:
            priority, target, reason = str(event.get("priority", "-")), "", str(event.get("status") or "")
        table.add_row(
            stamp(moment, now) if moment else str(event["time"]),
            event["event"],
            priority,
            target,
            reason,
            escape(_detail(event)),
        )
    print_whole(out, table)
    last = next((event for event in reversed(events) if event["event"] == "derived"), None)
    if last is not None and last.get("rules"):
        out.print(rules_table(last["rules"], title="Last decision, per rule"))


def _plot(events: Sequence[Mapping[str, Any]], path: Path, title: str) -> None:
    try:
        import matplotlib  # noqa: PLC0415 - optional dependency (osprey-aws[plot])

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        raise TargetError("--plot needs matplotlib: pip install 'osprey-aws[plot]'") from None
    figure, axes = plt.subplots(figsize=(9, 4))
    lines = (
        ("derived", "derived", "-"),
        ("applied", "applied", "--"),
        ("shadow", "shadow (not written)", ":"),
    )
    for kind, label, style in lines:
        times: list[datetime] = []
        values: list[float] = []
        for event in events:
            moment = _moment(event["time"])
            if event["event"] == kind and moment is not None and event.get("priority") is not None:
                times.append(moment)
                values.append(float(event["priority"]))
        if times:
            axes.step(times, values, style, where="post", label=label)  # type: ignore[arg-type]
    axes.set_ylim(0, 100)
    axes.set_ylabel("priority (0..100)")
    axes.set_title(title)
    axes.legend()
    figure.autofmt_xdate()
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)


def history_command(
    job: Annotated[str, typer.Argument(help="The job: BACKEND#ID, or an active job's name or native id.")],
    since: SinceOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: every event whole.")] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Also draw the priority over time to this PNG file.")
    ] = None,
    table: TableOption = None,
    shards: ShardsOption = None,
    profile: ProfileOption = None,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """Show how a job's priority moved: each decision (inputs, target, reason) and each apply outcome."""
    now = datetime.now(UTC)
    with guarded():
        start = parse_since(since, now)
        target = resolve_target(
            table=table, shards=shards, profile=profile, region=region, endpoint_url=endpoint_url
        )
        registry = target.registry()
        record = find_job(registry, job)
        decisions = registry.events.decisions(record.key, since=start, newest_first=False)
        applies = registry.events.apply_events(record.key, since=start, newest_first=False)
        statuses = [
            item
            for item in registry.events.status_events(record.key)
            if start is None or (_moment(item.get("recorded_at")) or start) >= start
        ]
        events = history_events(decisions, applies, statuses)
        title = f"{record.key} ({record.name}), policy {record.policy}: {len(events)} events"
        if plot is not None:
            _plot(events, plot, title)
        if as_json:
            typer.echo(
                json.dumps(
                    {"job": str(record.key), "name": record.name, "events": events}, indent=2, default=str
                )
            )
        else:
            _render(events, title, now)
            if plot is not None:
                typer.echo(f"plot: {plot}")
