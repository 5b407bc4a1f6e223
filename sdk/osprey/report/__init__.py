"""``osprey report``: the measured effect in production, from the registry's allocation history and decisions
(docs/report.md). :func:`read_snapshot` reads a registry (one Scan), :func:`build_report` computes the report
from it without AWS; the CLI (``osprey.cli.report``) renders it."""

from __future__ import annotations

from osprey.report.compute import OBSERVATION_NOTE, BackendReport, Report, build_report, iso_week
from osprey.report.figures import Figures
from osprey.report.model import (
    APPLIED_OUTCOME,
    IDLE_UTILIZATION_PCT,
    SHADOW_OUTCOME,
    JobTrail,
    Snapshot,
    parse_since,
)
from osprey.report.read import read_snapshot

__all__ = [
    "APPLIED_OUTCOME",
    "IDLE_UTILIZATION_PCT",
    "OBSERVATION_NOTE",
    "SHADOW_OUTCOME",
    "BackendReport",
    "Figures",
    "JobTrail",
    "Report",
    "Snapshot",
    "build_report",
    "iso_week",
    "parse_since",
    "read_snapshot",
]
