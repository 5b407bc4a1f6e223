"""Ingest: one EventBridge event → at most one convergent registry update.

:meth:`Ingestor.ingest_message` is what the SQS-triggered Lambda calls per record. A malformed event is logged
and reported as ``malformed`` (never retried: redelivery cannot fix it). Any AWS error propagates so that the
record becomes a batch item failure and SQS redelivers it (after the queue's maxReceiveCount it goes to the
dead-letter queue); transient ones are marked so in the log.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from osprey_control.aws import client_for, is_transient
from osprey_control.ingest.declared import smallest
from osprey_control.ingest.events import IgnoredEvent, JobEvent, MalformedEventError, SpotEvent, parse_event
from osprey_control.ingest.recognise import Recogniser
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.model import Backend, JobKey, JobRecord, JobStatus, NodeKind, NodeRef
from osprey_control.registry.observation import JobObservation

__all__ = ["SERVICE_TRAINING_PREFIX", "IngestOutcome", "Ingestor"]

logger = logging.getLogger(__name__)

# AWS Batch names the training jobs it creates for service jobs "AWSBatch<job name><hash>"; those are
# tracked once, as the service job (backend sagemaker-queued), not a second time as direct SageMaker jobs.
SERVICE_TRAINING_PREFIX = "AWSBatch"

# A multi-node parallel job's node jobs ("<job id>#<index>") are the parent job's nodes, not jobs of their own:
# their events only add the node's instance to the parent. Dated at the epoch, such an observation never moves
# the parent's status or description (the registry keeps the newest), whatever order the events arrive in.
MULTINODE_SEPARATOR = "#"
_NODE_EVENT_TIME = datetime(1970, 1, 1, tzinfo=UTC)

Action = Literal["registered", "updated", "duplicate", "ignored", "spot", "malformed"]


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    action: Action
    event_id: str = ""
    reason: str = ""
    jobs: tuple[JobKey, ...] = field(default=())


class Ingestor:
    """Parses, recognises and records events. Clients are created on first use when not passed."""

    def __init__(
        self,
        registry: JobRegistry,
        *,
        recogniser: Recogniser | None = None,
        ecs: Any = None,
        on_change: Callable[[JobRecord], object] | None = None,
    ) -> None:
        self.registry = registry
        self.recogniser = recogniser or Recogniser()
        self._ecs = ecs
        # Called with every record an event changed (the gang watch starter); its AWS errors propagate so the
        # event is redelivered, which is why what it does must be idempotent.
        self._on_change = on_change
        # container instance ARN -> (EC2 instance id, instance type), negative answers too
        self._instances: OrderedDict[str, tuple[str, str | None] | None] = OrderedDict()

    def ingest_message(self, body: str) -> IngestOutcome:
        """One SQS message body (an EventBridge event as JSON)."""
        try:
            try:
                event = json.loads(body)
            except ValueError as error:
                raise MalformedEventError(f"the message body is not JSON ({error})") from None
            return self.ingest(event)
        except MalformedEventError as error:
            logger.warning("malformed event skipped", extra={"event_id": error.event_id, "error": str(error)})
            return IngestOutcome("malformed", error.event_id or "", str(error))
        except Exception as error:
            logger.warning(
                "event failed; SQS will redeliver it",
                extra={"error": str(error), "transient": is_transient(error)},
            )
            raise

    def ingest(self, event: Any) -> IngestOutcome:
        parsed = parse_event(event)
        if isinstance(parsed, IgnoredEvent):
            return IngestOutcome(
                "ignored", parsed.event_id, f"detail-type {parsed.detail_type!r} is not handled"
            )
        if isinstance(parsed, SpotEvent):
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
        key = JobKey(event.backend, event.native_id)
        if event.backend is Backend.SAGEMAKER and event.native_id.startswith(SERVICE_TRAINING_PREFIX):
            return IngestOutcome(
                "ignored", event.event_id, "training job of an AWS Batch service job", (key,)
            )
        recognition = self.recogniser.recognise(event)
        if recognition.block is None:
            return IngestOutcome("ignored", event.event_id, "not an Osprey job", (key,))
        nodes = (*event.nodes, *recognition.hosts(event), *self._batch_instance(event))
        parent_id, _, node = event.native_id.partition(MULTINODE_SEPARATOR)
        node_job = event.backend is Backend.BATCH and bool(node)
        if node_job:
            key = JobKey(event.backend, parent_id)
        observation = JobObservation(
            backend=event.backend,
            native_id=key.native_id,
            name=event.name,
            arn=None if node_job else event.arn,
            block=recognition.block,
            status=JobStatus.PENDING if node_job else event.status,
            event_time=_NODE_EVENT_TIME if node_job else event.event_time,
            submitted_at=event.submitted_at,
            nodes=tuple(nodes),
            job_queue=event.job_queue,
            share_identifier=event.share_identifier,
            tags=dict(recognition.tags or {}),
            # A node job's own timeout and GPUs are one node's, not the job's: the parent's events carry those.
            declared_runtime_s=None
            if node_job
            else smallest(event.declared_runtime_s, recognition.payload_runtime_s),
            requested_gpus=None if node_job else event.requested_gpus or recognition.payload_gpus,
            marks_allocation=not node_job,
        )
        result = self.registry.apply_observation(observation)
        if result.changed and self._on_change is not None:
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

    def _batch_instance(self, event: JobEvent) -> tuple[NodeRef, ...]:
        """The EC2 instance of a Batch job on EC2 (its ECS container instance), so spot events find the job."""
        arn = event.container_instance_arn
        if arn is None:
            return ()
        if arn not in self._instances:
            self._instances[arn] = self._describe_container_instance(arn)
            if len(self._instances) > 4096:
                self._instances.popitem(last=False)
        instance = self._instances[arn]
        if instance is None:
            return ()
        instance_id, instance_type = instance
        node = NodeRef(
            node_id=instance_id,
            kind=NodeKind.INSTANCE,
            instance_id=instance_id,
            instance_type=instance_type,
            node_index=event.node_index,
        )
        return (node,)

    def _describe_container_instance(self, arn: str) -> tuple[str, str | None] | None:
        # arn:aws:ecs:<region>:<account>:container-instance/<cluster>/<id>; the cluster is needed to describe.
        parts = arn.split(":", 5)[-1].split("/")
        if len(parts) != 3:
            return None
        self._ecs = client_for("ecs", self._ecs)
        found = self._ecs.describe_container_instances(cluster=parts[1], containerInstances=[arn])
        instances = found.get("containerInstances") or []
        instance_id = instances[0].get("ec2InstanceId") if instances else None
        if not isinstance(instance_id, str):
            return None
        # ECS reports the instance type as the attribute ecs.instance-type.
        attributes = instances[0].get("attributes") or []
        instance_type = next(
            (
                a.get("value")
                for a in attributes
                if isinstance(a, dict) and a.get("name") == "ecs.instance-type"
            ),
            None,
        )
        return instance_id, instance_type if isinstance(instance_type, str) else None
