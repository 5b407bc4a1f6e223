"""What every scheduler's record of past jobs is read into: one :class:`PastJob` per job, and the record.

Times are epoch seconds (floats); a time the record does not have is None: ``start`` None is a job still
queued when the record was taken (or one that never started), ``end`` None one still running (or queued).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from osprey.simulate.model import SimulationError

__all__ = ["HistoryError", "PastJob", "SchedulerRecord"]


class HistoryError(SimulationError):
    """A record that cannot be read: names the file, the job (line or index) and the missing or bad field."""


@dataclass(frozen=True, slots=True)
class PastJob:
    """One job as the scheduler recorded it. ``gpus`` 0: the record says it used no GPU (never replayed);
    ``nodes`` is how many hosts it ran on (a gang when > 1); ``limit_s`` the runtime limit it declared (None:
    none, or unlimited); ``team`` its fair-share identity (Slurm account, Kueue queue, Batch share, ...);
    ``priority_class`` what the scheduler ordered it by at submission (Kueue's priority, Batch's
    ``schedulingPriority``; 0 when the format has none); ``state`` the scheduler's last word on it."""

    job_id: str
    submit: float
    start: float | None
    end: float | None
    gpus: int
    nodes: int = 1
    limit_s: float | None = None
    team: str = "default"
    priority_class: int = 0
    state: str = ""


@dataclass(frozen=True)
class SchedulerRecord:
    """A scheduler's record: its format (``slurm``, ``kueue``, ``batch``, ``sagemaker``, ``registry``), the
    native scheduler model it replays through, its jobs, and notes about what was skipped while reading."""

    format: str
    scheduler: str
    source: str
    jobs: tuple[PastJob, ...]
    notes: tuple[str, ...] = ()

    @property
    def end(self) -> float:
        """When the record was taken, as far as it says: its latest time of any kind."""
        times = [t for job in self.jobs for t in (job.submit, job.start, job.end) if t is not None]
        return max(times, default=0.0)


def parse_time(value: Any, field: str) -> float:
    """An ISO-8601 time (naive: UTC) or epoch seconds as epoch seconds; :class:`ValueError` naming ``field``."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: {value!r} is not a time")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{field}: {value!r} is not a time")
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{field}: {value!r} is not a time (ISO 8601 or epoch seconds)") from None
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    raise ValueError(f"{field}: {value!r} is not a time (ISO 8601 or epoch seconds)")


def dig(item: Any, path: str) -> Any:
    """``item["a"]["b"]`` for ``path`` ``a.b``; None where any step is missing or not an object."""
    for part in path.split("."):
        if not isinstance(item, dict):
            return None
        item = item.get(part)
    return item


def item_error(source: str, where: str, error: ValueError) -> HistoryError:
    """A parse error of one record item (``where``, e.g. ``jobs[3]``) in ``source``, located once: messages that
    already start with ``where`` (from :func:`require`) are not prefixed again."""
    text = str(error)
    return HistoryError(f"{source}: {text if text.startswith(where) else f'{where}: {text}'}")


def require(item: Any, path: str, where: str) -> Any:
    """``dig(item, path)``, or :class:`ValueError` saying ``where`` lacks ``path``."""
    value = dig(item, path)
    if value is None or value == "":
        raise ValueError(f"{where}: missing field {path}")
    return value


def positive_int(value: Any, field: str, *, minimum: int | None = 0) -> int:
    """``value`` as a whole number of at least ``minimum`` (None: any); :class:`ValueError` naming ``field``."""
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{field}: {value!r} is not a whole number") from None
    if minimum is not None and number < minimum:
        raise ValueError(f"{field}: {value!r} must be >= {minimum}")
    return number
