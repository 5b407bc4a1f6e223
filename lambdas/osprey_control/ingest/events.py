"""EventBridge events → what they say about a job or an instance. Pure Python, no AWS calls.

Handled ``detail-type`` values (anything else is :class:`IgnoredEvent`):

- ``SageMaker Training Job State Change`` → :class:`JobEvent` (backend ``sagemaker``; ``detail.Tags`` is a map)
- ``Batch Job State Change`` → :class:`JobEvent` (backend ``batch``; ``detail.tags`` map,
  ``detail.container.environment`` list)
- ``Batch Service Job State Change`` → :class:`JobEvent` (backend ``sagemaker-queued``, native id = service job
  id; the event carries no tags, so recognition always looks the job up)
- ``EC2 Spot Instance Interruption Warning`` → :class:`SpotEvent` risk 1.0
- ``EC2 Instance Rebalance Recommendation`` → :class:`SpotEvent` risk 0.5

Unknown fields are ignored (AWS adds fields over time), and so is an optional field of the wrong type. A
missing or mistyped field that Osprey needs, a time outside 2000..now, or an event whose ``source`` is not the
detail-type's raises :class:`MalformedEventError` naming the field; a value beyond :mod:`.limits` (hosts, tags,
lengths) raises :class:`OverLimitError` before anything is built from it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from osprey_control.backends.declared import (
    batch_declared_runtime,
    batch_requested_gpus,
    sagemaker_declared_runtime,
    sagemaker_requested_gpus,
)
from osprey_control.ingest.drops import MalformedEventError, OverLimitError
from osprey_control.ingest.hosts import sagemaker_hosts
from osprey_control.ingest.limits import (
    MAX_ARN,
    MAX_HOSTS,
    MAX_JOB_ID,
    MAX_NAME,
    MAX_TEXT,
    check_text,
    check_time,
    event_tags,
)
from osprey_control.ingest.status import UnknownStatusError, batch_status, sagemaker_status
from osprey_control.registry.model import Backend, JobStatus, NodeRef

__all__ = [
    "INTERRUPTION_RISK",
    "REBALANCE_RISK",
    "SOURCES",
    "IgnoredEvent",
    "JobEvent",
    "MalformedEventError",
    "OverLimitError",
    "ParsedEvent",
    "SpotEvent",
    "batch_environment",
    "parse_event",
    "parse_timestamp",
    "sagemaker_hosts",
]

INTERRUPTION_RISK = 1.0
REBALANCE_RISK = 0.5

SAGEMAKER_TRAINING = "SageMaker Training Job State Change"
BATCH_JOB = "Batch Job State Change"
BATCH_SERVICE_JOB = "Batch Service Job State Change"
SPOT_INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
# The source EventBridge stamps on each handled detail-type (the event rules match both).
SOURCES: Mapping[str, str] = {
    SAGEMAKER_TRAINING: "aws.sagemaker",
    BATCH_JOB: "aws.batch",
    BATCH_SERVICE_JOB: "aws.batch",
    SPOT_INTERRUPTION: "aws.ec2",
    REBALANCE: "aws.ec2",
}
# Epoch milliseconds up to the end of year 9999, the last a datetime holds.
_MAX_EPOCH_MS = 253_402_300_799_999


@dataclass(frozen=True, slots=True)
class JobEvent:
    """A job state change, before recognition (``tags`` / ``environment`` None: not in the event)."""

    event_id: str
    backend: Backend
    native_id: str
    name: str
    status: JobStatus
    native_status: str
    event_time: datetime
    arn: str | None = None
    tags: dict[str, str] | None = None
    environment: dict[str, str] | None = None
    submitted_at: datetime | None = None
    nodes: tuple[NodeRef, ...] = ()
    job_queue: str | None = None
    share_identifier: str | None = None
    container_instance_arn: str | None = None  # Batch on EC2: resolves to the job's EC2 instance
    training_job: str | None = None  # a service job's SageMaker training job, once Batch has started it
    node_index: int | None = None  # a Batch multi-node job's node (nodeDetails.nodeIndex)
    # What the job declares (osprey_control.backends.declared); a service job's come partly from its payload.
    declared_runtime_s: int | None = None
    requested_gpus: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


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


def parse_timestamp(value: Any) -> datetime | None:
    """AWS timestamps as they appear in events: epoch milliseconds (number or digits) or ISO 8601. None for
    anything else, including NaN, infinities and numbers no datetime holds."""
    if isinstance(value, bool) or value is None:
        return None
    millis: int | float | None = None
    if isinstance(value, int | float):
        millis = value
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        if text.isascii() and text.replace(".", "", 1).isdigit():
            millis = float(text) if len(text) <= 20 else None
        else:
            try:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    # Comparisons, not math.isfinite: they are False for NaN and hold for ints too large for a float.
    if millis is None or not 0 <= millis <= _MAX_EPOCH_MS:
        return None
    return datetime.fromtimestamp(millis / 1000, tz=UTC)


def _text(
    mapping: Mapping[str, Any], name: str, event_id: str, where: str = "detail", limit: int = MAX_TEXT
) -> str:
    value = mapping.get(name)
    if not isinstance(value, str) or not value:
        raise MalformedEventError(
            f"{where}.{name} must be a non-empty string, got {value!r:.100}", event_id=event_id
        )
    return check_text(value, f"{where}.{name}", limit, event_id)


def _optional_text(
    mapping: Mapping[str, Any], name: str, event_id: str | None = None, limit: int = MAX_TEXT
) -> str | None:
    value = mapping.get(name)
    if not isinstance(value, str) or not value:
        return None
    return check_text(value, name, limit, event_id)


def _environment_list(values: Any) -> dict[str, str]:
    if not isinstance(values, list):
        return {}
    return {
        str(entry["name"]): str(entry.get("value", ""))
        for entry in values
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str)
    }


def batch_environment(detail: Mapping[str, Any]) -> dict[str, str] | None:
    """The container environment of a Batch JobDetail (single container, multi-node or ECS properties);
    None when the detail has no container section at all (then DescribeJobs is asked)."""
    found = False
    environment: dict[str, str] = {}
    container = detail.get("container")
    if isinstance(container, Mapping):
        found = True
        environment.update(_environment_list(container.get("environment")))
    node_properties = detail.get("nodeProperties")
    if isinstance(node_properties, Mapping):
        for node_range in node_properties.get("nodeRangeProperties") or []:
            if isinstance(node_range, Mapping) and isinstance(node_range.get("container"), Mapping):
                found = True
                environment.update(_environment_list(node_range["container"].get("environment")))
    ecs = detail.get("ecsProperties")
    if isinstance(ecs, Mapping):
        for task in ecs.get("taskProperties") or []:
            for entry in (task.get("containers") or []) if isinstance(task, Mapping) else []:
                if isinstance(entry, Mapping):
                    found = True
                    environment.update(_environment_list(entry.get("environment")))
    return environment if found else None


def _node_index(detail: Mapping[str, Any], event_id: str) -> int | None:
    details = detail.get("nodeDetails")
    index = details.get("nodeIndex") if isinstance(details, Mapping) else None
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        return None
    if index >= MAX_HOSTS:
        raise OverLimitError(
            f"nodeDetails.nodeIndex {index} is beyond the {MAX_HOSTS} nodes Osprey tracks per job",
            event_id=event_id,
        )
    return index


def _sagemaker(event_id: str, when: datetime, detail: Mapping[str, Any]) -> JobEvent:
    name = _text(detail, "TrainingJobName", event_id, limit=MAX_NAME[Backend.SAGEMAKER])
    primary = _text(detail, "TrainingJobStatus", event_id)
    secondary = _optional_text(detail, "SecondaryStatus")
    environment = detail.get("Environment")
    return JobEvent(
        event_id=event_id,
        backend=Backend.SAGEMAKER,
        native_id=name,
        name=name,
        status=sagemaker_status(primary, secondary),
        native_status=f"{primary}/{secondary}" if secondary else primary,
        event_time=when,
        arn=_optional_text(detail, "TrainingJobArn", event_id, MAX_ARN),
        tags=event_tags(detail.get("Tags"), "detail.Tags", event_id),
        environment=(
            {str(key): str(value) for key, value in environment.items()}
            if isinstance(environment, Mapping)
            else None
        ),
        submitted_at=parse_timestamp(detail.get("CreationTime")),
        nodes=sagemaker_hosts(name, detail.get("ResourceConfig"), event_id),
        declared_runtime_s=sagemaker_declared_runtime(detail),
        requested_gpus=sagemaker_requested_gpus(detail.get("ResourceConfig")),
        detail=detail,
    )


def _batch(event_id: str, when: datetime, detail: Mapping[str, Any], *, service: bool) -> JobEvent:
    job_id = _text(detail, "jobId", event_id, limit=MAX_JOB_ID)
    status = _text(detail, "status", event_id)
    backend = Backend.SAGEMAKER_QUEUED if service else Backend.BATCH
    name = _optional_text(detail, "jobName", event_id, MAX_NAME[backend]) or job_id
    training_job: str | None = None
    if service:
        # The collector keys SageMaker metrics by the training job, which Batch names itself.
        latest = detail.get("latestAttempt")
        resource = latest.get("serviceResourceId") if isinstance(latest, Mapping) else None
        training_arn = (
            _optional_text(resource, "value", event_id, MAX_ARN) if isinstance(resource, Mapping) else None
        )
        if training_arn and "/" in training_arn:
            name = training_job = check_text(
                training_arn.rsplit("/", 1)[-1],
                "the training job name",
                MAX_NAME[Backend.SAGEMAKER],
                event_id,
            )
    container = detail.get("container")
    return JobEvent(
        event_id=event_id,
        backend=backend,
        native_id=job_id,
        name=name,
        status=batch_status(status, service=service),
        native_status=status,
        event_time=when,
        arn=_optional_text(detail, "jobArn", event_id, MAX_ARN),
        tags=None if service else event_tags(detail.get("tags"), "detail.tags", event_id),
        environment=None if service else batch_environment(detail),
        submitted_at=parse_timestamp(detail.get("createdAt")),
        job_queue=_optional_text(detail, "jobQueue", event_id, MAX_ARN),
        share_identifier=_optional_text(detail, "shareIdentifier", event_id),
        container_instance_arn=(
            _optional_text(container, "containerInstanceArn", event_id, MAX_ARN)
            if isinstance(container, Mapping)
            else None
        ),
        training_job=training_job,
        node_index=_node_index(detail, event_id),
        declared_runtime_s=batch_declared_runtime(detail),
        # A service job's detail has no resources: its GPUs are in the payload (read at recognition).
        requested_gpus=None if service else batch_requested_gpus(detail),
        detail=detail,
    )


def _spot(event_id: str, when: datetime, detail: Mapping[str, Any], detail_type: str) -> SpotEvent:
    instance_id = _text(detail, "instance-id", event_id)
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
    try:
        if detail_type == SAGEMAKER_TRAINING:
            return _sagemaker(event_id, when, detail)
        if detail_type in {BATCH_JOB, BATCH_SERVICE_JOB}:
            return _batch(event_id, when, detail, service=detail_type == BATCH_SERVICE_JOB)
    except UnknownStatusError as error:
        raise MalformedEventError(str(error), event_id=event_id) from None
    return _spot(event_id, when, detail, detail_type)
