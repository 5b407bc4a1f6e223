"""``osprey report``'s computation: a registry snapshot in, per backend and per ISO week the figures of
:mod:`osprey.report.figures`, and the period before enforcement against the period after. Pure Python.

Enforcement starts, per backend, at its first *applied* outcome (:data:`~osprey.report.model.APPLIED_OUTCOME`):
from then on Osprey's priorities reached that backend. The history before it (Osprey watching: shadow mode, or
jobs recorded before any apply) is the "before" period; a week that contains the start is split in two rows.
Apply outcomes expire with the history (14 days by default), so a start older than that reads as the oldest
applied outcome still held, and the comparison then has no "before" period in the registry.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from osprey.report.figures import Figures, Prepared, figures, prepare
from osprey.report.model import APPLIED_OUTCOME, IDLE_UTILIZATION_PCT, SHADOW_OUTCOME, JobTrail, Snapshot
from osprey.report.timeline import Timeline, build_timeline, moment

__all__ = ["OBSERVATION_NOTE", "BackendReport", "Report", "build_report", "iso_week"]

OBSERVATION_NOTE = (
    "An observation, not a controlled experiment: the periods before and after enforcement differ in workload, "
    "load, cluster size and everything else that changed meanwhile, so a difference is not proof that Osprey "
    "caused it."
)


def iso_week(when: datetime) -> str:
    year, week, _ = when.isocalendar()
    return f"{year}-W{week:02d}"


def _monday(when: datetime) -> datetime:
    day = when.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday())


@dataclass(frozen=True)
class Row:
    week: str
    period: str  # "before" (Osprey not applying yet) or "enforced"
    figures: Figures

    def to_dict(self) -> dict[str, Any]:
        return {"week": self.week, "period": self.period, **self.figures.to_dict()}


@dataclass(frozen=True)
class BackendReport:
    backend: str
    enforcement_start: datetime | None
    rows: tuple[Row, ...]
    before: Figures | None
    after: Figures | None
    comparison_note: str  # why there is no comparison, or OBSERVATION_NOTE

    def to_dict(self) -> dict[str, Any]:
        start = self.enforcement_start
        return {
            "backend": self.backend,
            "enforcement_start": start.isoformat() if start else None,
            "weeks": [row.to_dict() for row in self.rows],
            "comparison": (
                {"before": self.before.to_dict(), "after": self.after.to_dict(), "note": self.comparison_note}
                if self.before is not None and self.after is not None
                else {"before": None, "after": None, "note": self.comparison_note}
            ),
        }


@dataclass(frozen=True)
class Report:
    since: datetime
    until: datetime
    backends: tuple[BackendReport, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "observation": OBSERVATION_NOTE,
            "definitions": {
                "idle_utilization_pct": IDLE_UTILIZATION_PCT,
                "shadow_outcome": SHADOW_OUTCOME,
                "enforcement_outcome": APPLIED_OUTCOME,
                "docs": "docs/report.md",
            },
            "backends": [backend.to_dict() for backend in self.backends],
        }


def _enforcement_start(trails: Sequence[JobTrail]) -> datetime | None:
    found = [
        at
        for trail in trails
        for item in trail.applies
        if item.get("outcome") == APPLIED_OUTCOME and (at := moment(item.get("recorded_at"))) is not None
    ]
    return min(found, default=None)


def _rows(prepared: Prepared, since: datetime, until: datetime, start: datetime | None) -> list[Row]:
    rows = []
    week = _monday(since)
    while week < until:
        low, high = max(week, since), min(week + timedelta(days=7), until)
        cuts = [low, high] if start is None or not low < start < high else [low, start, high]
        for a, b in itertools.pairwise(cuts):
            period = "enforced" if start is not None and a >= start else "before"
            rows.append(Row(iso_week(a), period, figures(prepared, a, b)))
        week += timedelta(days=7)
    return rows


def _backend(
    backend: str, trails: Sequence[JobTrail], lines: dict[str, Timeline], since: datetime, until: datetime
) -> BackendReport:
    start = _enforcement_start(trails)
    prepared = prepare(trails, lines)
    rows = tuple(_rows(prepared, since, until, start))
    if start is None:
        note = "not enforced: no priority was applied to this backend (shadow mode, or every apply failed)"
        return BackendReport(backend, None, rows, None, None, note)
    if start <= since:
        note = f"enforced since {start.isoformat()}, before --since: widen --since to compare with the period before"
        return BackendReport(backend, start, rows, None, None, note)
    before, after = figures(prepared, since, start), figures(prepared, start, until)
    if before.jobs == 0:
        note = "no job was recorded before enforcement began: nothing to compare with"
        return BackendReport(backend, start, rows, None, None, note)
    return BackendReport(backend, start, rows, before, after, OBSERVATION_NOTE)


def build_report(snapshot: Snapshot, since: datetime) -> Report:
    """The report of every backend with a job alive after ``since`` (to the snapshot's time)."""
    until = snapshot.read_at
    lines = {str(t.record.key): build_timeline(t.record, t.decisions, until) for t in snapshot.jobs}
    by_backend: dict[str, list[JobTrail]] = {}
    for trail in snapshot.jobs:
        line = lines[str(trail.record.key)]
        if line.end >= since:
            by_backend.setdefault(trail.record.backend.value, []).append(trail)
    return Report(
        since=since,
        until=until,
        backends=tuple(
            _backend(name, trails, lines, since, until) for name, trails in sorted(by_backend.items())
        ),
    )
