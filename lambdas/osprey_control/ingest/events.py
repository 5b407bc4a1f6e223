"""EventBridge events → what they say about a job or an instance. Pure Python, no AWS calls.

Handled ``detail-type`` values (anything else is :class:`IgnoredEvent`):

- job state changes → :class:`~osprey_control.backends.events.JobEvent`, read by the backend each belongs to
  (:data:`JOB_EVENTS`; the backend's package reads it, ``DRIVER.events`` through
  :func:`osprey_control.backends.driver_for`):

  - ``SageMaker Training Job State Change`` → backend ``sagemaker``
  - ``Batch Job State Change`` → backend ``batch``
  - ``Batch Service Job State Change`` → backend ``sagemaker-queued`` (native id = service job id)
- ``EC2 Spot Instance Interruption Warning`` → :class:`SpotEvent` risk 1.0
- ``EC2 Instance Rebalance Recommendation`` → :class:`SpotEvent` risk 0.5

Unknown fields are ignored (AWS adds fields over time), and so is an optional field of the wrong type. A
missing or mistyped field that Osprey needs, an unknown status, a time outside 2000..now, or an event whose
``source`` is not the detail-type's raises :class:`MalformedEventError` naming the field; a value beyond the
limits (hosts, tags, lengths: :mod:`osprey_control.backends.limits`) raises :class:`OverLimitError` before
anything is built from it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from osprey_control import wiring
from osprey_control.backends import (
    MAX_TEXT,
    EventDriver,
    JobEvent,
    JobEvents,
    MalformedEventError,
    UnknownStatusError,
    driver_for,
    parse_timestamp,
    required_text,
)
from osprey_control.ingest.limits import check_time
from osprey_control.registry import Backend

__all__ = ["INTERRUPTION_RISK", "REBALANCE_RISK", "IgnoredEvent", "JobEvent", "SpotEvent", "parse_event"]

INTERRUPTION_RISK = 1.0
REBALANCE_RISK = 0.5

SAGEMAKER_TRAINING = wiring.SAGEMAKER_TRAINING_EVENT
BATCH_JOB = wiring.BATCH_JOB_EVENT
BATCH_SERVICE_JOB = wiring.BATCH_SERVICE_JOB_EVENT
SPOT_INTERRUPTION = wiring.SPOT_INTERRUPTION_EVENT
REBALANCE = wiring.REBALANCE_EVENT
# The source EventBridge stamps on each handled detail-type (the event rules match both).
SOURCES: Mapping[str, str] = wiring.EVENT_SOURCES
# The backend whose package reads each job event; the detail-types not here are the spot events, read below.
JOB_EVENTS: Mapping[str, Backend] = {
    SAGEMAKER_TRAINING: Backend.SAGEMAKER,
    BATCH_JOB: Backend.BATCH,
    BATCH_SERVICE_JOB: Backend.SAGEMAKER_QUEUED,
}


@dataclass(frozen=True, slots=True)
class SpotEvent:
    event_id: str
    instance_id: str
    risk: float
    event_time: datetime
    kind: str  # "interruption" or "rebalance"


@dataclass(frozen=True, slots=True)
class IgnoredEvent:
    event_id: str
    detail_type: str


ParsedEvent = JobEvent | SpotEvent | IgnoredEvent

_INSTANCE_ID = re.compile(r"i-[0-9a-f]{8,32}")


@cache
def job_events(backend: Backend) -> JobEvents:
    """How ``backend``'s events are read and its jobs recognised (its driver's ``events``)."""
    driver = driver_for(backend)
    if not isinstance(driver, EventDriver):
        raise RuntimeError(
            f"{backend.value} jobs are found by {driver.recognition}, not by events; "
            "JOB_EVENTS must name only backends whose DRIVER has events"
        )
    return driver.events


def _spot(event_id: str, when: datetime, detail: Mapping[str, Any], detail_type: str) -> SpotEvent:
    instance_id = required_text(detail, "instance-id", event_id)
    if not _INSTANCE_ID.fullmatch(instance_id):
        raise MalformedEventError(
            f"detail.instance-id {instance_id!r:.100} is not an EC2 instance id", event_id=event_id
        )
    interruption = detail_type == SPOT_INTERRUPTION
    return SpotEvent(
        event_id=event_id,
        instance_id=instance_id,
        risk=INTERRUPTION_RISK if interruption else REBALANCE_RISK,
        event_time=when,
        kind="interruption" if interruption else "rebalance",
    )


def parse_event(event: Any, *, now: datetime | None = None) -> ParsedEvent:
    """One EventBridge event (the decoded SQS message body) → a typed event. ``now``: the latest event time
    accepted (plus the clock skew of :mod:`.limits`); without it, times are only checked against 2000."""
    if not isinstance(event, Mapping):
        raise MalformedEventError(f"an EventBridge event is a JSON object, got {type(event).__name__}")
    event_id = event.get("id") if isinstance(event.get("id"), str) else None
    if event_id is not None and len(event_id) > MAX_TEXT:
        event_id = None  # not echoed into logs; the rest of the event decides
    detail_type = event.get("detail-type")
    if not isinstance(detail_type, str):
        raise MalformedEventError(
            f"detail-type must be a string, got {detail_type!r:.100}", event_id=event_id
        )
    event_id = event_id or ""
    if detail_type not in SOURCES:
        return IgnoredEvent(event_id, detail_type[:MAX_TEXT])
    if event.get("source") != SOURCES[detail_type]:
        raise MalformedEventError(
            f"source {event.get('source')!r:.100} does not send {detail_type!r} (expected "
            f"{SOURCES[detail_type]!r})",
            event_id=event_id,
        )
    when = parse_timestamp(event.get("time"))
    if when is None:
        raise MalformedEventError(
            f"time must be an ISO 8601 time, got {event.get('time')!r:.100}", event_id=event_id
        )
    check_time(when, "time", now, event_id)
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise MalformedEventError(f"detail must be an object, got {detail!r:.100}", event_id=event_id)
    backend = JOB_EVENTS.get(detail_type)
    if backend is None:
        return _spot(event_id, when, detail, detail_type)
    try:
        return job_events(backend).parse(event_id, when, detail)
    except UnknownStatusError as error:
        raise MalformedEventError(str(error), event_id=event_id) from None
