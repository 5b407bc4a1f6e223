"""Batch Job State Change events (source ``aws.batch``) → :class:`JobEvent`, and the lookups that recognise a
Batch job whose event lacks what recognition needs.

The event's ``detail`` is a Batch ``JobDetail``: ``tags`` a map, the container environment in ``container``
(single container), ``nodeProperties`` (multi-node) or ``ecsProperties``; when it has neither tags nor a
container section, DescribeJobs is asked. A job on EC2 names its ECS container instance, which gives its EC2
instance (:mod:`.ecs`). A multi-node parallel job's node jobs (``<job id>#<index>``) are the parent job's nodes,
not jobs of their own: ingest adds the node's instance to the parent.

Statuses: SUBMITTED, PENDING, RUNNABLE → PENDING; STARTING → STARTING; RUNNING → RUNNING; SUCCEEDED; FAILED.
What a service job's event shares with a container job's (it is a ``JobDetail`` too) is read here for both
(:func:`job_identity`, :func:`job_detail`); what differs is :mod:`osprey_control.backends.sagemaker_queue`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from osprey_control.backends.batch.ecs import ContainerInstances
from osprey_control.backends.declared import batch_declared_runtime, batch_requested_gpus
from osprey_control.backends.events import (
    AwsClients,
    JobDescription,
    JobEvent,
    NodeFinder,
    UnknownStatusError,
    optional_text,
    parse_timestamp,
    required_text,
)
from osprey_control.backends.limits import MAX_ARN, MAX_HOSTS, MAX_JOB_ID, OverLimitError, event_tags
from osprey_control.contract import ENABLED_TAG, tags_as_dict
from osprey_control.registry.model import Backend, JobStatus

__all__ = [
    "BATCH_STATUS",
    "EVENTS",
    "MAX_NAME",
    "MULTINODE_SEPARATOR",
    "BatchJobEvents",
    "batch_environment",
    "batch_status",
    "job_detail",
    "job_identity",
]

# The longest job name AWS Batch accepts (jobs and service jobs alike).
MAX_NAME = 128
# A multi-node parallel job's node jobs are "<job id>#<index>".
MULTINODE_SEPARATOR = "#"

BATCH_STATUS: dict[str, JobStatus] = {
    "SUBMITTED": JobStatus.PENDING,
    "PENDING": JobStatus.PENDING,
    "RUNNABLE": JobStatus.PENDING,
    "STARTING": JobStatus.STARTING,
    "RUNNING": JobStatus.RUNNING,
    "SUCCEEDED": JobStatus.SUCCEEDED,
    "FAILED": JobStatus.FAILED,
}


def batch_status(status: str, table: Mapping[str, JobStatus] = BATCH_STATUS, kind: str = "job") -> JobStatus:
    """``status`` by ``table`` (a service job's has one more status); :class:`UnknownStatusError` naming the
    AWS Batch ``kind`` when the table lacks it."""
    try:
        return table[status]
    except KeyError:
        raise UnknownStatusError(
            f"unknown AWS Batch {kind} status {status!r}; expected one of {', '.join(table)}"
        ) from None


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


def job_identity(event_id: str, detail: Mapping[str, Any], name_limit: int) -> tuple[str, str, str]:
    """A JobDetail's ``(jobId, status, jobName)``, the name defaulting to the id."""
    job_id = required_text(detail, "jobId", event_id, limit=MAX_JOB_ID)
    status = required_text(detail, "status", event_id)
    return job_id, status, optional_text(detail, "jobName", event_id, name_limit) or job_id


def job_detail(event_id: str, detail: Mapping[str, Any]) -> dict[str, Any]:
    """The JobEvent fields every JobDetail gives alike, read in this order (after the job's tags)."""
    container = detail.get("container")
    return {
        "submitted_at": parse_timestamp(detail.get("createdAt")),
        "job_queue": optional_text(detail, "jobQueue", event_id, MAX_ARN),
        "share_identifier": optional_text(detail, "shareIdentifier", event_id),
        "container_instance_arn": (
            optional_text(container, "containerInstanceArn", event_id, MAX_ARN)
            if isinstance(container, Mapping)
            else None
        ),
        "node_index": _node_index(detail, event_id),
        "declared_runtime_s": batch_declared_runtime(detail),
    }


def _parse(event_id: str, when: datetime, detail: Mapping[str, Any]) -> JobEvent:
    # The fields are read in this order (the first problem found is the one reported).
    job_id, status, name = job_identity(event_id, detail, MAX_NAME)
    return JobEvent(
        event_id=event_id,
        backend=Backend.BATCH,
        native_id=job_id,
        name=name,
        status=batch_status(status),
        native_status=status,
        event_time=when,
        arn=optional_text(detail, "jobArn", event_id, MAX_ARN),
        tags=event_tags(detail.get("tags"), "detail.tags", event_id),
        environment=batch_environment(detail),
        **job_detail(event_id, detail),
        requested_gpus=batch_requested_gpus(detail),
        detail=detail,
    )


def _describe(event: JobEvent, clients: AwsClients) -> JobDescription | None:
    tags, environment = event.tags, event.environment
    if tags is not None and ENABLED_TAG in tags:
        return JobDescription(tags)
    if tags is None and environment is None:
        jobs = clients.client("batch").describe_jobs(jobs=[event.native_id]).get("jobs") or []
        if not jobs:
            return None
        tags = tags_as_dict(jobs[0].get("tags"))
        environment = batch_environment(jobs[0])
    return JobDescription(tags, environment)


class BatchJobEvents:
    """The :class:`~osprey_control.backends.events.JobEvents` of Batch container jobs."""

    def parse(self, event_id: str, when: datetime, detail: Mapping[str, Any]) -> JobEvent:
        return _parse(event_id, when, detail)

    def ignored(self, event: JobEvent) -> str | None:
        return None

    def parent(self, event: JobEvent) -> str | None:
        parent_id, _, node = event.native_id.partition(MULTINODE_SEPARATOR)
        return parent_id if node else None

    def describe(
        self, event: JobEvent, clients: AwsClients, *, by_environment: bool
    ) -> JobDescription | None:
        # A Batch job's environment is in its JobDetail with its tags: one lookup gives both, so
        # by_environment saves none.
        return _describe(event, clients)

    def node_finder(self, clients: AwsClients) -> NodeFinder:
        return ContainerInstances(clients)


EVENTS = BatchJobEvents()
