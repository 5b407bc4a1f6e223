"""Ingest: one EventBridge event → at most one convergent registry update.

:meth:`Ingestor.ingest_message` is what the SQS-triggered Lambda calls per record; the type of a failure
decides what happens to the record (:mod:`osprey_control.errors`):

- :class:`~osprey_control.errors.PermanentError` (a malformed, unsupported or over-limit event, or a request AWS
  refused): the event is **dropped**: logged with its reason, reported as ``dropped`` (the handler counts it as
  ``EventsDropped`` by reason) and never redelivered, since redelivery cannot change it;
- :class:`~osprey_control.ingest.faults.InfrastructureError` (AWS refused a good event for the deployment's
  sake: access denied, Osprey's table or state machine not found, an item too large; :mod:`.faults`): never
  dropped nor counted as a drop; it propagates, so SQS redelivers it and then keeps it in the dead-letter queue,
  whose alarm fires;
- :class:`~osprey_control.errors.TransientError` (throttling, 5xx, no connection, a registry race lost too
  often): it propagates, the record becomes a batch item failure and SQS redelivers it;
- anything else is a bug: it propagates too (kopf's default for unknown errors), so the event is redelivered
  and, after the queue's maxReceiveCount, kept in the dead-letter queue, whose alarm asks for a look.

AWS errors are classified where the calls are made (:func:`osprey_control.errors.classified`). What differs by
backend (a job event ingest leaves to another backend, a node job's parent, nodes only lookups reveal) is the
backend's (:class:`~osprey_control.backends.events.JobEvents`, reached by the event's backend).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NoReturn

from pydantic import ValidationError

from osprey_control.backends import JobEvent, NodeFinder, check_tags, smallest
from osprey_control.contract import OspreyBlock
from osprey_control.errors import PermanentError, TransientError
from osprey_control.ingest.bounds import check_job_event
from osprey_control.ingest.drops import (
    MalformedEventError,
    OverLimitError,
    UnsupportedEventError,
    drop_reason,
)
from osprey_control.ingest.events import IgnoredEvent, SpotEvent, job_events, parse_event
from osprey_control.ingest.faults import InfrastructureError, deployment_call, infrastructure_fault
from osprey_control.ingest.limits import MAX_BODY_BYTES
from osprey_control.ingest.recognise import LazyClients, Recogniser, Recognition
from osprey_control.registry import (
    Backend,
    JobKey,
    JobObservation,
    JobRecord,
    JobRegistry,
    JobStatus,
    NodeRef,
)

__all__ = ["IngestOutcome", "Ingestor"]

logger = logging.getLogger(__name__)

# A node job (its backend names its parent: a multi-node parallel job's "<job id>#<index>") is one of the
# parent job's nodes, not a job of its own: its events only add the node's instance to the parent. Dated at the
# epoch, such an observation never moves the parent's status or description (the registry keeps the newest),
# whatever order the events arrive in.
_NODE_EVENT_TIME = datetime(1970, 1, 1, tzinfo=UTC)

Action = Literal["registered", "updated", "duplicate", "ignored", "spot", "dropped"]


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    action: Action
    event_id: str = ""
    # registered / updated / duplicate: how the job was recognised; ignored: why; spot: the kind; dropped: the
    # DropReason value (the detail is logged).
    reason: str = ""
    jobs: tuple[JobKey, ...] = field(default=())


def _not_a_number(constant: str) -> NoReturn:
    raise ValueError(f"{constant} is not a JSON number")


def decode_body(body: str) -> Any:
    """The SQS message body as JSON (strict: no NaN or Infinity, which no AWS event contains)."""
    if len(body) > MAX_BODY_BYTES:
        raise OverLimitError(
            f"the message body has {len(body)} characters; EventBridge events are at most 256 KB"
        )
    try:
        return json.loads(body, parse_constant=_not_a_number)
    except (ValueError, RecursionError) as error:  # RecursionError: nested deeper than the parser goes
        raise MalformedEventError(f"the message body is not JSON ({str(error)[:200]})") from None


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Ingestor:
    """Parses, recognises and records events. Clients are created on first use when not passed."""

    def __init__(
        self,
        registry: JobRegistry,
        *,
        recogniser: Recogniser | None = None,
        ecs: Any = None,
        on_change: Callable[[JobRecord], object] | None = None,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.registry = registry
        self.recogniser = recogniser or Recogniser()
        self._clients = LazyClients(ecs=ecs)
        self._clock = clock  # events dated after it (plus the clock skew) are malformed
        # Called with every record an event changed (the gang watch starter); its AWS errors propagate so the
        # event is redelivered, which is why what it does must be idempotent.
        self._on_change = on_change
        # Each backend's, made on its first event: they may cache their lookups (a Batch job's EC2 instance).
        self._node_finders: dict[Backend, NodeFinder] = {}

    def ingest_message(self, body: str) -> IngestOutcome:
        """One SQS message body (an EventBridge event as JSON): ``dropped`` for a permanent failure; a transient
        or unclassified one propagates (see the module docstring)."""
        event_id = ""
        try:
            event = decode_body(body)
            if isinstance(event, dict) and isinstance(event.get("id"), str):
                event_id = event["id"][:100]
            return self.ingest(event)
        except InfrastructureError as error:
            self._fault(event_id, error)
            raise
        except PermanentError as error:
            fault = infrastructure_fault(error, own_resource=False)
            if fault is not None:  # a lookup the role may not make: the deployment's fault, not the event's
                self._fault(event_id, fault)
                raise fault from error
            reason = drop_reason(error)
            logger.warning(
                "event dropped",
                extra={"reason": reason.value, "event_id": event_id, "error": str(error)[:1000]},
            )
            return IngestOutcome("dropped", event_id, reason.value)
        except TransientError as error:
            logger.warning(
                "event failed transiently; SQS will redeliver it",
                extra={"event_id": event_id, "error": str(error)[:1000]},
            )
            raise
        except Exception:
            logger.exception(
                "event failed unexpectedly; SQS will redeliver it, then keep it in the dead-letter queue",
                extra={"event_id": event_id},
            )
            raise

    @staticmethod
    def _fault(event_id: str, error: InfrastructureError) -> None:
        logger.error(
            "event not recorded: an infrastructure fault; SQS will redeliver it, then keep it in the "
            "dead-letter queue",
            extra={"event_id": event_id, "error": str(error)[:1000]},
        )

    def ingest(self, event: Any) -> IngestOutcome:
        """One decoded event; raises a :class:`PermanentError` for an event that must be dropped."""
        parsed = parse_event(event, now=self._clock())
        if isinstance(parsed, IgnoredEvent):
            raise UnsupportedEventError(
                f"detail-type {parsed.detail_type!r:.100} is not one ingest handles; the event rules send none "
                "such, so check what else sends to the queue",
                event_id=parsed.event_id,
            )
        if isinstance(parsed, SpotEvent):
            with deployment_call():
                jobs = self.registry.mark_spot_risk(parsed.instance_id, parsed.risk, parsed.event_time)
            logger.info(
                "spot risk recorded",
                extra={
                    "instance_id": parsed.instance_id,
                    "risk": parsed.risk,
                    "jobs": [str(j) for j in jobs],
                },
            )
            return IngestOutcome("spot", parsed.event_id, parsed.kind, tuple(jobs))
        return self._job(parsed)

    def _job(self, event: JobEvent) -> IngestOutcome:
        backend_events = job_events(event.backend)
        key = JobKey(event.backend, event.native_id)
        elsewhere = backend_events.ignored(event)
        if elsewhere is not None:
            return IngestOutcome("ignored", event.event_id, elsewhere, (key,))
        parent_id = backend_events.parent(event)
        # Before any lookup of the job: an id that cannot form a key, an ARN naming another job or an
        # impossible time is dropped with its reason, never stored (ingest/bounds.py).
        check_job_event(event, parent_id, self._clock())
        recognition = self.recogniser.recognise(event)
        block = recognition.block
        if block is None:
            return IngestOutcome("ignored", event.event_id, recognition.reason, (key,))
        nodes = [*event.nodes, *self._node_finder(event.backend)(event, recognition.description)]
        node_job = parent_id is not None
        if parent_id is not None:
            key = JobKey(event.backend, parent_id)
        try:
            observation = self._observation(event, key, block, recognition, nodes, node_job=node_job)
        except ValidationError as error:
            raise MalformedEventError(
                f"the event's values are not a valid job ({str(error)[:300]})", event_id=event.event_id
            ) from None
        with deployment_call():
            result = self.registry.apply_observation(observation)
        if result.changed and self._on_change is not None:
            # Its AWS errors are classified like the registry's: a transient one or a fault of the deployment
            # redelivers the event (starting a gang watch is idempotent), a permanent one drops it; the record
            # above is written either way.
            with deployment_call():
                self._on_change(result.record)
        action: Action = (
            "duplicate" if not result.changed else "registered" if result.record.version == 1 else "updated"
        )
        logger.info(
            "job event recorded",
            extra={
                "job": str(key),
                "action": action,
                "status": result.record.status.value,
                "event_status": event.native_status,
                "recognised_by": recognition.how,
                "version": result.record.version,
            },
        )
        return IngestOutcome(action, event.event_id, recognition.how, (key,))

    @staticmethod
    def _observation(
        event: JobEvent,
        key: JobKey,
        block: OspreyBlock,
        recognition: Recognition,
        nodes: list[NodeRef],
        *,
        node_job: bool,
    ) -> JobObservation:
        return JobObservation(
            backend=event.backend,
            native_id=key.native_id,
            name=event.name,
            arn=None if node_job else event.arn,
            block=block,
            status=JobStatus.PENDING if node_job else event.status,
            event_time=_NODE_EVENT_TIME if node_job else event.event_time,
            submitted_at=event.submitted_at,
            nodes=tuple(nodes),
            job_queue=event.job_queue,
            share_identifier=event.share_identifier,
            tags=dict(check_tags(recognition.tags or {}, event.event_id)),
            # A node job's own timeout and GPUs are one node's, not the job's: the parent's events carry those.
            declared_runtime_s=None
            if node_job
            else smallest(event.declared_runtime_s, recognition.description.declared_runtime_s),
            requested_gpus=None
            if node_job
            else event.requested_gpus or recognition.description.requested_gpus,
            marks_allocation=not node_job,
            native_priority=None if node_job else recognition.description.native_priority,
        )

    def _node_finder(self, backend: Backend) -> NodeFinder:
        finder = self._node_finders.get(backend)
        if finder is None:
            finder = self._node_finders[backend] = job_events(backend).node_finder(self._clients)
        return finder
