"""Events ingest drops on purpose: why (a few stable reasons) and the metric that counts them.

A dropped event is logged with its reason and the detail, counted as ``EventsDropped`` (dimension ``Reason``),
and reported to SQS as processed, so it is never redelivered: redelivering cannot change the event.

=============  ===========================================================================================
Reason         the event
=============  ===========================================================================================
malformed      is not JSON, or a field Osprey reads is missing, mistyped, out of range or an unknown status
unsupported    has a detail-type the ingest function does not handle (the event rules send none such)
over-limit     is larger than Osprey stores: too many hosts, tags or characters (:mod:`.limits`,
               :mod:`osprey_control.backends.limits`)
rejected       made AWS refuse a request permanently (validation, access denied, not found)
=============  ===========================================================================================

Each reason is one custom metric (billed per month), so the set stays this small; the log holds the detail.
The errors of a malformed or over-limit event are the backends' parsers' as much as ingest's, so they live
below both (:mod:`osprey_control.backends.limits`) and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from osprey_control.backends import MALFORMED, OVER_LIMIT, MalformedEventError, OverLimitError
from osprey_control.errors import REJECTED, PermanentError
from osprey_control.telemetry import MetricPoint
from osprey_control.wiring import EVENTS_DROPPED_METRIC, REASON_DIMENSION

__all__ = [
    "EVENTS_DROPPED",
    "DropReason",
    "MalformedEventError",
    "OverLimitError",
    "UnsupportedEventError",
    "drop_metrics",
]

EVENTS_DROPPED = EVENTS_DROPPED_METRIC  # the name the dashboard graphs, from osprey_control.wiring


class DropReason(StrEnum):
    MALFORMED = MALFORMED
    UNSUPPORTED = "unsupported"
    OVER_LIMIT = OVER_LIMIT
    REJECTED = REJECTED


class UnsupportedEventError(MalformedEventError):
    hint = "the queue should receive only what Osprey's event rules send (docs/registry.md, Ingest)"

    def __init__(self, message: str, *, event_id: str | None = None) -> None:
        super().__init__(message, event_id=event_id, reason=DropReason.UNSUPPORTED)


def drop_reason(error: PermanentError) -> DropReason:
    """The metric's reason for a permanent failure (any reason outside the set counts as ``rejected``)."""
    try:
        return DropReason(error.reason)
    except ValueError:
        return DropReason.REJECTED


def drop_metrics(counts: Mapping[DropReason, int]) -> list[MetricPoint]:
    """One ``EventsDropped`` point per reason that dropped something (no points when nothing was dropped)."""
    return [
        MetricPoint(EVENTS_DROPPED, "Count", (float(count),), {REASON_DIMENSION: reason.value})
        for reason, count in sorted(counts.items())
        if count > 0
    ]
