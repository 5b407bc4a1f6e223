"""Batch Job State Change events (source ``aws.batch``) → :class:`JobEvent`, and the lookups that recognise a
Batch job whose event lacks what recognition needs.

The event's ``detail`` is a Batch ``JobDetail``: ``tags`` a map, the container environment in ``container``
(single container), ``nodeProperties`` (multi-node) or ``ecsProperties``; when it has neither tags nor a
container section, DescribeJobs is asked. A job on EC2 names its ECS container instance, which gives its EC2
instance (:mod:`.ecs`). A multi-node parallel job's node jobs (``<job id>#<index>``) are the parent job's nodes,
not jobs of their own: ingest adds the node's instance to the parent.

What a container job's event shares with a service job's (both are ``JobDetail``s: the name limit, the
statuses, the common fields) is :mod:`osprey_control.backends.aws_batch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from osprey_control.backends.aws_batch import batch_status, job_detail, job_identity
from osprey_control.backends.batch.ecs import ContainerInstances
from osprey_control.backends.declared import batch_requested_gpus
from osprey_control.backends.events import AwsClients, JobDescription, JobEvent, NodeFinder, optional_text
from osprey_control.backends.limits import MAX_ARN, event_tags
from osprey_control.contract import ENABLED_TAG, tags_as_dict
from osprey_control.registry import Backend

__all__: list[str] = []

# A multi-node parallel job's node jobs are "<job id>#<index>".
MULTINODE_SEPARATOR = "#"


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


def _parse(event_id: str, when: datetime, detail: Mapping[str, Any]) -> JobEvent:
    # The fields are read in this order (the first problem found is the one reported).
    job_id, status, name = job_identity(event_id, detail)
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
