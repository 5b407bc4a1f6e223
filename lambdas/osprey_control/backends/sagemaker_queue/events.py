"""Batch Service Job State Change events (source ``aws.batch``) → :class:`JobEvent` keyed by the service job id,
and DescribeServiceJob, which every service job's recognition needs.

A service job's ``detail`` is a Batch ``JobDetail`` (:mod:`osprey_control.backends.aws_batch`) without tags,
environment or resources. Its name is the SageMaker training job Batch started for it
(``latestAttempt.serviceResourceId``), once there is one, since the collector keys SageMaker metrics by that.
DescribeServiceJob gives the tags (else the training request payload's copy), the payload's ``Environment``,
its ``StoppingCondition`` (the event carries only Batch's timeout) and its ``ResourceConfig``: the GPUs, and
the hosts once the training job runs (``<training job>/algo-N``, like a SageMaker job's).

Statuses: those of a Batch job (:data:`~osprey_control.backends.aws_batch.BATCH_STATUS`), and SCHEDULED
(handed to SageMaker, instances being provisioned) → STARTING.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from osprey_control.backends.aws_batch import BATCH_STATUS, batch_status, job_detail, job_identity
from osprey_control.backends.declared import sagemaker_declared_runtime, sagemaker_requested_gpus
from osprey_control.backends.events import AwsClients, JobDescription, JobEvent, NodeFinder, optional_text
from osprey_control.backends.limits import MAX_ARN, check_text, event_tags
from osprey_control.backends.sagemaker import MAX_NAME as MAX_TRAINING_JOB_NAME
from osprey_control.backends.sagemaker import sagemaker_hosts
from osprey_control.contract import tags_as_dict
from osprey_control.registry import Backend, JobStatus, NodeRef

__all__: list[str] = []

SERVICE_JOB_STATUS: dict[str, JobStatus] = {**BATCH_STATUS, "SCHEDULED": JobStatus.STARTING}


def service_job_status(status: str) -> JobStatus:
    return batch_status(status, SERVICE_JOB_STATUS, "service job")


def _parse(event_id: str, when: datetime, detail: Mapping[str, Any]) -> JobEvent:
    # The fields are read in this order (the first problem found is the one reported).
    job_id, status, name = job_identity(event_id, detail)
    training_job: str | None = None
    latest = detail.get("latestAttempt")
    resource = latest.get("serviceResourceId") if isinstance(latest, Mapping) else None
    training_arn = (
        optional_text(resource, "value", event_id, MAX_ARN) if isinstance(resource, Mapping) else None
    )
    if training_arn and "/" in training_arn:
        name = training_job = check_text(
            training_arn.rsplit("/", 1)[-1], "the training job name", MAX_TRAINING_JOB_NAME, event_id
        )
    return JobEvent(
        event_id=event_id,
        backend=Backend.SAGEMAKER_QUEUED,
        native_id=job_id,
        name=name,
        status=service_job_status(status),
        native_status=status,
        event_time=when,
        arn=optional_text(detail, "jobArn", event_id, MAX_ARN),
        tags=None,  # service job events never carry tags
        environment=None,
        training_job=training_job,
        **job_detail(event_id, detail),
        # Its detail has no resources: its GPUs are in the payload (read at recognition).
        requested_gpus=None,
        detail=detail,
    )


def _describe(event: JobEvent, clients: AwsClients) -> JobDescription:
    described = clients.client("batch").describe_service_job(jobId=event.native_id)
    tags = tags_as_dict(described.get("tags"))
    try:
        payload = json.loads(described.get("serviceRequestPayload") or "{}")
    except ValueError:
        payload = {}
    if not isinstance(payload, Mapping):
        payload = {}
    if not tags:
        # The SDK copies the training job's tags onto the service job; fall back to the payload's copy
        # (what the submitter wrote: read as strictly as an event's tags).
        tags = event_tags(payload.get("Tags"), "the service job payload's Tags", event.event_id) or {}
    environment = payload.get("Environment")
    resource_config = payload.get("ResourceConfig")
    return JobDescription(
        tags,
        {str(k): str(v) for k, v in environment.items()} if isinstance(environment, Mapping) else {},
        declared_runtime_s=sagemaker_declared_runtime(payload),
        requested_gpus=sagemaker_requested_gpus(resource_config),
        resource_config=resource_config if isinstance(resource_config, Mapping) else None,
        native_priority=_scheduling_priority(described.get("schedulingPriority")),
    )


def _scheduling_priority(value: Any) -> int | None:
    """The service job's ``schedulingPriority`` (0..9999) as DescribeServiceJob returns it. Before Osprey's
    first UpdateServiceJob it is the one the job was submitted with, the job's native place in its share; the
    registry keeps that first value (JobRecord.native_priority). Anything else is no value."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 9999:
        return None
    return value


class ServiceJobEvents:
    """The :class:`~osprey_control.backends.events.JobEvents` of service jobs."""

    def parse(self, event_id: str, when: datetime, detail: Mapping[str, Any]) -> JobEvent:
        return _parse(event_id, when, detail)

    def ignored(self, event: JobEvent) -> str | None:
        return None

    def parent(self, event: JobEvent) -> str | None:
        return None

    def describe(self, event: JobEvent, clients: AwsClients, *, by_environment: bool) -> JobDescription:
        # Always: a service job's event carries neither its tags nor its environment.
        return _describe(event, clients)

    def node_finder(self, clients: AwsClients) -> NodeFinder:
        return _training_hosts


def _training_hosts(event: JobEvent, description: JobDescription) -> tuple[NodeRef, ...]:
    """The hosts of the training job the service job started, once it has one (a service job runs on
    SageMaker: it has no ECS container instance to look up)."""
    if event.training_job is None or description.resource_config is None:
        return ()
    return sagemaker_hosts(event.training_job, description.resource_config, event.event_id)


EVENTS = ServiceJobEvents()
