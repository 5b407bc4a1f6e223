"""What ingest and the backends whose jobs announce themselves through EventBridge share: the :class:`JobEvent`
a backend's parser returns, the :class:`JobDescription` its recognition lookups return, the :class:`JobEvents`
facet its driver offers (``DRIVER.events``, :class:`osprey_control.backends.driver.EventDriver`), and the field
readers every parser uses.

Ingest decodes the message, checks the envelope and routes each job event by its ``detail-type`` to the
backend's ``parse``; it recognises the job (tags first, then the environment, docs/design.md §5) with what the
event carries, asking ``describe`` once per job per process for what it lacks; it records the job, with any
nodes that only lookups reveal (``node_finder``). What each backend's events say and where its lookups go is
in its package's ``events`` module; what ingest accepts of them at most is :mod:`.limits`.

Unknown fields are ignored (AWS adds fields over time), and so is an optional field of the wrong type. A
missing or mistyped field that Osprey needs raises :class:`~osprey_control.backends.limits.MalformedEventError`
naming the field, an unknown status :class:`UnknownStatusError` (ingest drops both as malformed), and a value
beyond :mod:`.limits` :class:`~osprey_control.backends.limits.OverLimitError` before anything is built from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from osprey_control.backends.limits import MAX_TEXT, MalformedEventError, check_text
from osprey_control.registry import Backend, JobStatus, NodeRef

__all__ = [
    "JobDescription",
    "JobEvent",
    "JobEvents",
    "NodeFinder",
    "UnknownStatusError",
    "parse_timestamp",
    "required_text",
]

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
class JobDescription:
    """What a backend read about a job to recognise it: the event's own tags and environment, completed by
    lookups where the event lacks them (``environment`` None: not read, the tags decide)."""

    tags: Mapping[str, str] | None = None
    environment: Mapping[str, str] | None = None
    # A service job's training request (DescribeServiceJob's payload; its event carries neither): its
    # StoppingCondition limit, the GPUs and the ResourceConfig that gives its hosts once it runs.
    declared_runtime_s: int | None = None
    requested_gpus: int | None = None
    resource_config: Mapping[str, Any] | None = None
    # The job's own priority in the backend's terms (a service job's submitted ``schedulingPriority``), when the
    # lookup shows one: the registry keeps the first seen, before Osprey writes (JobRecord.native_priority).
    native_priority: int | None = None


class UnknownStatusError(ValueError):
    """A status this version of Osprey does not know (ingest drops the event as malformed)."""


class AwsClients(Protocol):
    """boto3 clients by service name, as ingest holds them (passed in tests, else created on first use)."""

    def client(self, service: str) -> Any:
        """The client of ``service`` (``"sagemaker"``, ``"batch"``, ``"ecs"``)."""
        ...


# The nodes of a job event that only lookups reveal (a Batch job's EC2 instance, a service job's hosts).
NodeFinder = Callable[[JobEvent, JobDescription], tuple[NodeRef, ...]]


class JobEvents(Protocol):
    """How a backend's jobs reach the registry through EventBridge (the module docstring tells the order)."""

    def parse(self, event_id: str, when: datetime, detail: Mapping[str, Any]) -> JobEvent:
        """The ``detail`` of one of the backend's events, dated ``when`` (the envelope's time, checked)."""
        ...

    def ignored(self, event: JobEvent) -> str | None:
        """Why ingest records nothing of this event's job (another backend tracks it); None when it records."""
        ...

    def parent(self, event: JobEvent) -> str | None:
        """The native id of the job whose node this event's job is (its events only add that node to the
        parent), None for a job of its own."""
        ...

    def describe(
        self, event: JobEvent, clients: AwsClients, *, by_environment: bool
    ) -> JobDescription | None:
        """The job's tags and environment, looked up when the event lacks what recognition needs (ingest
        classifies the AWS errors and caches the answer per job); None when the job no longer exists.
        ``by_environment`` False: only tags can opt the job in, so its environment need not be read."""
        ...

    def node_finder(self, clients: AwsClients) -> NodeFinder:
        """The backend's :data:`NodeFinder`, one per ingest process (it may cache its lookups)."""
        ...


def no_nodes(event: JobEvent, description: JobDescription) -> tuple[NodeRef, ...]:
    """The :data:`NodeFinder` of a backend whose events name all of a job's nodes."""
    return ()


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


def required_text(
    mapping: Mapping[str, Any], name: str, event_id: str, where: str = "detail", limit: int = MAX_TEXT
) -> str:
    """``mapping[name]``, a non-empty string of at most ``limit`` characters (errors name ``where.name``)."""
    value = mapping.get(name)
    if not isinstance(value, str) or not value:
        raise MalformedEventError(
            f"{where}.{name} must be a non-empty string, got {value!r:.100}", event_id=event_id
        )
    return check_text(value, f"{where}.{name}", limit, event_id)


def optional_text(
    mapping: Mapping[str, Any], name: str, event_id: str | None = None, limit: int = MAX_TEXT
) -> str | None:
    """``mapping[name]`` when a non-empty string (of at most ``limit`` characters), else None."""
    value = mapping.get(name)
    if not isinstance(value, str) or not value:
        return None
    return check_text(value, name, limit, event_id)
