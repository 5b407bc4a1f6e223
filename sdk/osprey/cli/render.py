"""Human-readable decision tables, in the spirit of Slurm's ``sprio``: one row per rule, then the job."""

from __future__ import annotations

import sys

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from osprey_control.derivation import Decision, JobMetrics

__all__ = ["render_decision"]


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render_decision(decision: Decision, job: JobMetrics, console: Console | None = None) -> None:
    # Piped output keeps full rows rather than wrapping at rich's default 80 columns.
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    # Job ids come from users' files and AWS: never let them be read as rich markup.
    title = escape(f"policy {decision.policy} · job {job.job_id} · {len(job.nodes)} node(s)")
    rules = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for header in (
        "RULE",
        "KIND",
        "METRIC/FUNCTION",
        "VALUE",
        "NORM",
        "SCORE",
        "PRIORITY",
        "WEIGHT",
        "OUTCOME",
    ):
        numeric = header in {"VALUE", "NORM", "SCORE", "PRIORITY", "WEIGHT"}
        rules.add_column(header, justify="right" if numeric else "left", no_wrap=True)
    for rule in decision.rules:
        label = rule.metric or (rule.arn or "").rsplit(":function:", 1)[-1]
        rules.add_row(
            str(rule.index),
            rule.kind,
            escape(label),
            _number(rule.value),
            _number(rule.normalized, 3),
            _number(rule.score, 3),
            _number(rule.priority),
            "stage" if rule.kind == "custom" and rule.weight is None else _number(rule.weight, 3),
            rule.outcome,
        )
    console.print(rules)
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
