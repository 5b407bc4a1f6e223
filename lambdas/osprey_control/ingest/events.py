"""EventBridge events → what they say about a job or an instance. Pure Python, no AWS calls.

Handled ``detail-type`` values (anything else is :class:`IgnoredEvent`):

- ``SageMaker Training Job State Change`` → :class:`JobEvent` (backend ``sagemaker``; ``detail.Tags`` is a map)
- ``Batch Job State Change`` → :class:`JobEvent` (backend ``batch``; ``detail.tags`` map,
  ``detail.container.environment`` list)
- ``Batch Service Job State Change`` → :class:`JobEvent` (backend ``sagemaker-queued``, native id = service job
  id; the event carries no tags, so recognition always looks the job up)
- ``EC2 Spot Instance Interruption Warning`` → :class:`SpotEvent` risk 1.0
- ``EC2 Instance Rebalance Recommendation`` → :class:`SpotEvent` risk 0.5

Unknown fields are ignored (AWS adds fields over time). A missing or mistyped field that Osprey needs raises
:class:`MalformedEventError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from osprey_control.contract import tags_as_dict
from osprey_control.ingest.declared import (
    batch_declared_runtime,
    batch_requested_gpus,
    sagemaker_declared_runtime,
    sagemaker_requested_gpus,
)
from osprey_control.ingest.status import UnknownStatusError, batch_status, sagemaker_status
from osprey_control.registry.model import Backend, JobStatus, NodeKind, NodeRef

__all__ = [
    "INTERRUPTION_RISK",
    "REBALANCE_RISK",
    "IgnoredEvent",
    "JobEvent",
    "MalformedEventError",
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


class MalformedEventError(ValueError):
    """The event cannot be understood; it is reported and skipped (redelivering it would not help)."""

    def __init__(self, message: str, *, event_id: str | None = None) -> None:
        self.event_id = event_id
        where = f"event {event_id}: " if event_id else ""
        super().__init__(
            f"{where}{message}. The event is skipped; if it came from AWS, check the EventBridge rule "
            "delivers the unmodified event (no input transformer)."
        )


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
    # What the job declares (osprey_control.ingest.declared); a service job's come partly from its payload.
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


def parse_timestamp(value: Any) -> datetime | None:
    """AWS timestamps as they appear in events: epoch milliseconds (number or digits) or ISO 8601."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if text.replace(".", "", 1).isdigit():
            return datetime.fromtimestamp(float(text) / 1000, tz=UTC)
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _text(mapping: Mapping[str, Any], name: str, event_id: str, where: str = "detail") -> str:
    value = mapping.get(name)
    if not isinstance(value, str) or not value:
        raise MalformedEventError(
            f"{where}.{name} must be a non-empty string, got {value!r}", event_id=event_id
        )
    return value


def _optional_text(mapping: Mapping[str, Any], name: str) -> str | None:
    value = mapping.get(name)
    return value if isinstance(value, str) and value else None


def _tags(detail: Mapping[str, Any], name: str) -> dict[str, str] | None:
    value = detail.get(name)
    if value is None:
        return None
    if isinstance(value, Mapping | list):
        return tags_as_dict(value)
    return None


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


def sagemaker_hosts(job_name: str, resource_config: Any) -> tuple[NodeRef, ...]:
    """``<job>/algo-1`` ... ``<job>/algo-N`` (the ``Host`` dimension of /aws/sagemaker/TrainingJobs), with the
    GPUs per host when the instance type is known (the collector divides SageMaker's per-host GPU sums)."""
    if not isinstance(resource_config, Mapping):
        return ()
    # Imported here: the collect package pulls in the collector, which the Batch and spot paths never need.
    from osprey_control.collect.queries import gpus_for_instance_type  # noqa: PLC0415

    groups = [resource_config, *(resource_config.get("InstanceGroups") or [])]
    hosts: list[NodeRef] = []
    for group in groups:
        if not isinstance(group, Mapping):
            continue
        count = group.get("InstanceCount")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            continue
        instance_type = group.get("InstanceType")
        gpus = gpus_for_instance_type(instance_type if isinstance(instance_type, str) else None)
        for _ in range(min(count, 10_000)):
            hosts.append(
                NodeRef(
                    node_id=f"{job_name}/algo-{len(hosts) + 1}",
                    kind=NodeKind.HOST,
                    gpus=gpus,
                    instance_type=instance_type if isinstance(instance_type, str) else None,
                )
            )
    return tuple(hosts)


def _node_index(detail: Mapping[str, Any]) -> int | None:
    details = detail.get("nodeDetails")
    index = details.get("nodeIndex") if isinstance(details, Mapping) else None
    return index if isinstance(index, int) and not isinstance(index, bool) and index >= 0 else None


def _sagemaker(event_id: str, when: datetime, detail: Mapping[str, Any]) -> JobEvent:
    name = _text(detail, "TrainingJobName", event_id)
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
        arn=_optional_text(detail, "TrainingJobArn"),
        tags=_tags(detail, "Tags"),
        environment=(
            {str(key): str(value) for key, value in environment.items()}
            if isinstance(environment, Mapping)
            else None
        ),
        submitted_at=parse_timestamp(detail.get("CreationTime")),
        nodes=sagemaker_hosts(name, detail.get("ResourceConfig")),
        declared_runtime_s=sagemaker_declared_runtime(detail),
        requested_gpus=sagemaker_requested_gpus(detail.get("ResourceConfig")),
        detail=detail,
    )


def _batch(event_id: str, when: datetime, detail: Mapping[str, Any], *, service: bool) -> JobEvent:
    job_id = _text(detail, "jobId", event_id)
    status = _text(detail, "status", event_id)
    name = _optional_text(detail, "jobName") or job_id
    training_job: str | None = None
    if service:
        # The collector keys SageMaker metrics by the training job, which Batch names itself.
        latest = detail.get("latestAttempt")
        resource = latest.get("serviceResourceId") if isinstance(latest, Mapping) else None
        training_arn = _optional_text(resource, "value") if isinstance(resource, Mapping) else None
        if training_arn and "/" in training_arn:
            name = training_job = training_arn.rsplit("/", 1)[-1]
    container = detail.get("container")
    return JobEvent(
        event_id=event_id,
        backend=Backend.SAGEMAKER_QUEUED if service else Backend.BATCH,
        native_id=job_id,
        name=name,
        status=batch_status(status, service=service),
        native_status=status,
        event_time=when,
        arn=_optional_text(detail, "jobArn"),
        tags=None if service else _tags(detail, "tags"),
        environment=None if service else batch_environment(detail),
        submitted_at=parse_timestamp(detail.get("createdAt")),
        job_queue=_optional_text(detail, "jobQueue"),
        share_identifier=_optional_text(detail, "shareIdentifier"),
        container_instance_arn=(
            _optional_text(container, "containerInstanceArn") if isinstance(container, Mapping) else None
        ),
        training_job=training_job,
        node_index=_node_index(detail),
        declared_runtime_s=batch_declared_runtime(detail),
        # A service job's detail has no resources: its GPUs are in the payload (read at recognition).
        requested_gpus=None if service else batch_requested_gpus(detail),
        detail=detail,
    )


def _spot(event_id: str, when: datetime, detail: Mapping[str, Any], detail_type: str) -> SpotEvent:
    instance_id = _text(detail, "instance-id", event_id)
    interruption = detail_type == SPOT_INTERRUPTION
    return SpotEvent(
        event_id=event_id,
        instance_id=instance_id,
        risk=INTERRUPTION_RISK if interruption else REBALANCE_RISK,
        event_time=when,
        kind="interruption" if interruption else "rebalance",
    )


def parse_event(event: Any) -> ParsedEvent:
    """One EventBridge event (the decoded SQS message body) → a typed event."""
    if not isinstance(event, Mapping):
        raise MalformedEventError(f"an EventBridge event is a JSON object, got {type(event).__name__}")
    event_id = event.get("id") if isinstance(event.get("id"), str) else None
    detail_type = event.get("detail-type")
    if not isinstance(detail_type, str):
        raise MalformedEventError(f"detail-type must be a string, got {detail_type!r}", event_id=event_id)
    event_id = event_id or ""
    if detail_type not in {SAGEMAKER_TRAINING, BATCH_JOB, BATCH_SERVICE_JOB, SPOT_INTERRUPTION, REBALANCE}:
        return IgnoredEvent(event_id, detail_type)
    when = parse_timestamp(event.get("time"))
    if when is None:
        raise MalformedEventError(
            f"time must be an ISO 8601 time, got {event.get('time')!r}", event_id=event_id
        )
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise MalformedEventError(f"detail must be an object, got {detail!r}", event_id=event_id)
    try:
        if detail_type == SAGEMAKER_TRAINING:
            return _sagemaker(event_id, when, detail)
        if detail_type in {BATCH_JOB, BATCH_SERVICE_JOB}:
            return _batch(event_id, when, detail, service=detail_type == BATCH_SERVICE_JOB)
    except UnknownStatusError as error:
        raise MalformedEventError(str(error), event_id=event_id) from None
    return _spot(event_id, when, detail, detail_type)
