"""What ingest accepts of one message: its size and the time its event claims, checked before it is parsed.

What one job's event may hold (hosts, tags, names, ARNs) is shared with the backends' event parsers and lives
below both (:mod:`osprey_control.backends.limits`, whose table is repeated in docs/registry.md):

=====================  ==========  ===============================================================
bound                  value       why this value
=====================  ==========  ===============================================================
message body           256 KiB     EventBridge's maximum event size
event time             2000 ..     AWS never dates an event earlier, nor later than the function's
                       now + 1 h   clock allows for skew
=====================  ==========  ===============================================================
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from osprey_control.backends import MalformedEventError

__all__: list[str] = []

MAX_BODY_BYTES = 256 * 1024
# Event times come from AWS: before 2000 or later than the function's clock allows for skew, they are forged or
# corrupt, and a far-future time would freeze the job's description (the newest event wins, docs/registry.md).
EARLIEST_TIME = datetime(2000, 1, 1, tzinfo=UTC)
MAX_CLOCK_SKEW = timedelta(hours=1)


def check_time(when: datetime, field: str, now: datetime | None, event_id: str | None) -> datetime:
    """``when`` if between 2000 and ``now`` plus the clock skew (no upper bound without ``now``)."""
    latest = now + MAX_CLOCK_SKEW if now is not None else None
    if when < EARLIEST_TIME or (latest is not None and when > latest):
        raise MalformedEventError(
            f"{field} {when.isoformat()} is outside {EARLIEST_TIME.year}..now; AWS never dates an event so",
            event_id=event_id,
        )
    return when
