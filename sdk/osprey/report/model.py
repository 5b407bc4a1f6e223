"""What ``osprey report`` reads from the registry, as plain values (no AWS), and the report's constants.

:class:`JobTrail` is one job and its history items as :mod:`osprey.report.read` found them; :class:`Snapshot` is
every job of the registry at one moment. The computation (:mod:`osprey.report.compute`) takes a snapshot and
never calls AWS, so a test can hand it any history.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from osprey_control.registry import JobRecord

__all__ = [
    "APPLIED_OUTCOME",
    "IDLE_UTILIZATION_PCT",
    "SHADOW_OUTCOME",
    "JobTrail",
    "Snapshot",
    "parse_since",
]

# The apply outcome that means "the backend holds it": the first one per backend marks the start of enforcement
# (osprey_control.registry.history.APPLIED, the value the apply step records).
APPLIED_OUTCOME = "applied"
# The apply outcome of a decision that shadow mode kept from the backend (issue 30 item 1): the value the apply
# step records (osprey_control.registry.history.SHADOW; tests/unit/test_report.py holds the two equal).
SHADOW_OUTCOME = "shadow"
# A running job whose last recorded mean GPU utilization (percent) is below this holds its GPUs idle. The
# simulator's "allocated but not training" is exact; the registry only knows the sampled mean, so a small floor
# (data loading, checkpointing) is not idle.
IDLE_UTILIZATION_PCT = 10.0

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
SINCE_FORMS = "a duration (12h, 7d, 2w) or an ISO date or time (2026-11-30, 2026-11-30T08:00:00Z)"


def parse_since(value: str, now: datetime) -> datetime:
    """``7d`` → now - 7 days (``s``, ``m``, ``h``, ``d``, ``w``); an ISO date (midnight UTC) or time (UTC unless it
    says). ValueError saying what is allowed otherwise, or for a time after ``now``."""
    text = value.strip()
    found = re.fullmatch(r"(\d+)\s*([smhdw])", text)
    if found:
        if int(found.group(1)) <= 0:
            raise ValueError(f"{value!r} is not a positive duration; use {SINCE_FORMS}")
        return now - timedelta(seconds=int(found.group(1)) * _UNITS[found.group(2)])
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is neither {SINCE_FORMS}") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    if moment >= now:
        raise ValueError(f"{value!r} is in the future; use {SINCE_FORMS}")
    return moment


@dataclass(frozen=True)
class JobTrail:
    """One job: its record (with its allocation history) and its history items, oldest first. ``decisions``:
    ``recorded_at``, ``derived_priority``, ``previous_priority``, ``decision`` (parsed); ``applies``:
    ``recorded_at``, ``outcome``, ``priority``; ``gang``: the gang watch's values with ``updated_at``, or None."""

    record: JobRecord
    decisions: tuple[Mapping[str, Any], ...] = ()
    applies: tuple[Mapping[str, Any], ...] = ()
    gang: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Snapshot:
    """Every job of a registry, read at ``read_at``."""

    jobs: tuple[JobTrail, ...]
    read_at: datetime
