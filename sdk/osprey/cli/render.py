"""Human-readable decision tables, in the spirit of Slurm's ``sprio``: one row per rule, then the job; and the
short and full forms of a gang's watch state (``osprey jobs``, ``osprey explain``, ``osprey local``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from osprey.views import dropped_rules, effective_weights
from osprey_control.derivation import Decision, JobMetrics
from osprey_control.gang import GangPhase, GangState

__all__: list[str] = []


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def rules_table(rules: Sequence[Mapping[str, Any]], title: str | None = None) -> Table:
    """One row per rule of a decision's JSON form (``Decision.to_dict()["rules"]``, or a stored decision).
    WEIGHT is the policy's; EFFECTIVE the share it really had once rules without data were dropped and the
    rest renormalised (docs/design.md §4)."""
    effective = effective_weights(rules)
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for header in (
        "RULE",
        "KIND",
        "METRIC/FUNCTION",
        "VALUE",
        "NORM",
        "SCORE",
        "PRIORITY",
        "WEIGHT",
        "EFFECTIVE",
        "OUTCOME",
    ):
        numeric = header in {"VALUE", "NORM", "SCORE", "PRIORITY", "WEIGHT", "EFFECTIVE"}
        table.add_column(header, justify="right" if numeric else "left", no_wrap=True)
    for rule in rules:
        label = rule.get("metric") or str(rule.get("arn") or "").rsplit(":function:", 1)[-1]
        stage = rule["kind"] == "custom" and rule.get("weight") is None
        table.add_row(
            str(rule["index"]),
            rule["kind"],
            escape(label),  # ids and names come from users' files and AWS: never read them as markup
            _number(rule.get("value")),
            _number(rule.get("normalized"), 3),
            _number(rule.get("score"), 3),
            _number(rule.get("priority")),
            "stage" if stage else _number(rule.get("weight"), 3),
            "stage" if stage else _number(effective.get(int(rule["index"])), 3),
            str(rule.get("outcome", "")),
        )
    return table


def dropped_line(rules: Sequence[Mapping[str, Any]]) -> str | None:
    """Which weighted rules had no data and how the others were renormalised; None when every rule counted."""
    dropped = dropped_rules(rules)
    if not dropped:
        return None
    names = ", ".join(
        f"rule {rule['index']} ({rule.get('metric') or str(rule.get('arn') or '').rsplit(':function:', 1)[-1]}, "
        f"weight {float(rule['weight']):.3f})"
        for rule in dropped
    )
    kept = sum(
        float(rule["weight"]) for rule in rules if rule.get("weight") is not None and rule not in dropped
    )
    if kept <= 0:
        return f"no data for any weighted rule: {names}; the priority stays where it was (no-data)"
    return f"no data: {names} dropped; the other weights (sum {kept:.3f}) were renormalised to 1 (EFFECTIVE column)"


def render_decision(decision: Decision, job: JobMetrics, console: Console | None = None) -> None:
    # Piped output keeps full rows rather than wrapping at rich's default 80 columns.
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    title = escape(f"policy {decision.policy} · job {job.job_id} · {len(job.nodes)} node(s)")
    explained = decision.to_dict()["rules"]
    console.print(rules_table(explained, title))
    dropped = dropped_line(explained)
    if dropped is not None:
        console.print(escape(dropped))
    summary = Table(box=box.SIMPLE_HEAD)
    for header in ("JOBID", "PREVIOUS", "BASE", "TARGET", "PRIORITY", "CHANGE", "REASON"):
        summary.add_column(header)
    summary.add_row(
        escape(job.job_id),
        str(decision.previous),
        _number(decision.base),
        _number(decision.target),
        f"[bold]{decision.priority}[/bold]",
        f"{decision.priority - decision.previous:+d}",
        decision.reason,
    )
    console.print(summary)


def gang_line(state: GangState) -> str:
    """``osprey explain``'s gang line: phase, attempt, requeues, workers, wait, and the watch's reason."""
    wait = "-" if state.wait_seconds is None else f"{state.wait_seconds:.0f} s"
    workers = f"{state.ready_workers}/{state.requested_workers}" if state.requested_workers else "-"
    line = (
        f"gang {state.phase.value}: attempt {state.attempt}, {state.requeues} requeue(s), "
        f"{workers} workers ready, waited {wait}"
    )
    if state.phase is GangPhase.REQUEUED and state.resume_at is not None:
        line += f", resumes at {state.resume_at.isoformat()}"
    return f"{line} ({state.reason})" if state.reason else line
