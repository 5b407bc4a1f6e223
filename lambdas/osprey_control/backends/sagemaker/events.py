"""SageMaker Training Job State Change events (source ``aws.sagemaker``) → :class:`JobEvent`, and the lookups
that recognise a training job whose event lacks what recognition needs.

The event's ``detail`` is a DescribeTrainingJob response: ``Tags`` a map, ``Environment``, ``ResourceConfig``
(the hosts, :mod:`.hosts`) and ``StoppingCondition``. When it carries no ``Tags`` key, ListTags is asked; when
the tags do not opt the job in and recognition by environment is on, DescribeTrainingJob gives the
``Environment`` the event lacks. Training jobs that AWS Batch creates for service jobs (``AWSBatch<name>...``)
are the service job's (:mod:`osprey_control.backends.sagemaker_queue`), so ingest records nothing of them here.

Statuses (``TrainingJobStatus`` / ``SecondaryStatus``, the table is repeated in docs/registry.md): a terminal
primary status decides (Completed → SUCCEEDED, Failed → FAILED, Stopped → STOPPED); otherwise the secondary
status does:

==========================================================================================  ===========
SecondaryStatus                                                                             JobStatus
==========================================================================================  ===========
Pending                                                                                     PENDING
Starting, LaunchingMLInstances, PreparingTrainingStack, Downloading, DownloadingTrainingImage,  STARTING
Restarting, Interrupted (managed spot: capacity lost, the job waits to restart)
Training, Uploading, Updating, Stopping (still holds its instances)                         RUNNING
Completed / Failed / Stopped, MaxRuntimeExceeded, MaxWaitTimeExceeded                        SUCCEEDED / FAILED / STOPPED
unknown, with InProgress / Stopping                                                         STARTING / RUNNING
==========================================================================================  ===========
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from osprey_control.backends.declared import sagemaker_declared_runtime, sagemaker_requested_gpus
from osprey_control.backends.events import (
    AwsClients,
    JobDescription,
    JobEvent,
    NodeFinder,
    UnknownStatusError,
    no_nodes,
    optional_text,
    parse_timestamp,
    required_text,
)
from osprey_control.backends.limits import MAX_ARN, event_tags
from osprey_control.backends.sagemaker.hosts import sagemaker_hosts
from osprey_control.contract import ENABLED_TAG, tags_as_dict
from osprey_control.registry import Backend, JobStatus

__all__ = ["MAX_NAME"]

# The longest training job name SageMaker accepts.
MAX_NAME = 63
# AWS Batch names the training jobs it creates for service jobs "AWSBatch<job name><hash>"; those are
# tracked once, as the service job (backend sagemaker-queued), not a second time as direct SageMaker jobs.
SERVICE_TRAINING_PREFIX = "AWSBatch"

_P, _S, _R = JobStatus.PENDING, JobStatus.STARTING, JobStatus.RUNNING

_TERMINAL = {
    "Completed": JobStatus.SUCCEEDED,
    "Failed": JobStatus.FAILED,
    "Stopped": JobStatus.STOPPED,
}
_SECONDARY = {
    "Pending": _P,
    "Starting": _S,
    "LaunchingMLInstances": _S,
    "PreparingTrainingStack": _S,
    "Downloading": _S,
    "DownloadingTrainingImage": _S,
    "Restarting": _S,
    "Interrupted": _S,
    "Training": _R,
    "Uploading": _R,
    "Updating": _R,
    "Stopping": _R,
    "Completed": JobStatus.SUCCEEDED,
    "Failed": JobStatus.FAILED,
    "Stopped": JobStatus.STOPPED,
    "MaxRuntimeExceeded": JobStatus.STOPPED,
    "MaxWaitTimeExceeded": JobStatus.STOPPED,
}
_PRIMARY_DEFAULT = {"InProgress": _S, "Stopping": _R}


def sagemaker_status(primary: str, secondary: str | None) -> JobStatus:
    terminal = _TERMINAL.get(primary)
    if terminal is not None:
        return terminal
    if secondary in _SECONDARY:
        return _SECONDARY[secondary]
    if primary in _PRIMARY_DEFAULT:
        return _PRIMARY_DEFAULT[primary]
    allowed = ", ".join([*_PRIMARY_DEFAULT, *_TERMINAL])
    raise UnknownStatusError(f"unknown TrainingJobStatus {primary!r}; expected one of {allowed}")


def _parse(event_id: str, when: datetime, detail: Mapping[str, Any]) -> JobEvent:
    # The fields are read in this order (the first problem found is the one reported).
    name = required_text(detail, "TrainingJobName", event_id, limit=MAX_NAME)
    primary = required_text(detail, "TrainingJobStatus", event_id)
    secondary = optional_text(detail, "SecondaryStatus")
    environment = detail.get("Environment")
    return JobEvent(
        event_id=event_id,
        backend=Backend.SAGEMAKER,
        native_id=name,
        name=name,
        status=sagemaker_status(primary, secondary),
        native_status=f"{primary}/{secondary}" if secondary else primary,
        event_time=when,
        arn=optional_text(detail, "TrainingJobArn", event_id, MAX_ARN),
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


def _describe(event: JobEvent, clients: AwsClients, *, by_environment: bool) -> JobDescription:
    tags = event.tags
    if tags is None and event.arn:
        tags = {}
        for page in clients.client("sagemaker").get_paginator("list_tags").paginate(ResourceArn=event.arn):
            tags.update(tags_as_dict(page.get("Tags")))
    if (tags is not None and ENABLED_TAG in tags) or not by_environment:
        return JobDescription(tags)
    environment = event.environment
    if environment is None:
        described = clients.client("sagemaker").describe_training_job(TrainingJobName=event.native_id)
        environment = {str(k): str(v) for k, v in (described.get("Environment") or {}).items()}
    return JobDescription(tags, environment)


class TrainingJobEvents:
    """The :class:`~osprey_control.backends.events.JobEvents` of training jobs created directly."""

    def parse(self, event_id: str, when: datetime, detail: Mapping[str, Any]) -> JobEvent:
        return _parse(event_id, when, detail)

    def ignored(self, event: JobEvent) -> str | None:
        return (
            "training job of an AWS Batch service job"
            if event.native_id.startswith(SERVICE_TRAINING_PREFIX)
            else None
        )

    def parent(self, event: JobEvent) -> str | None:
        return None

    def describe(self, event: JobEvent, clients: AwsClients, *, by_environment: bool) -> JobDescription:
        return _describe(event, clients, by_environment=by_environment)

    def node_finder(self, clients: AwsClients) -> NodeFinder:
        return no_nodes  # the event's ResourceConfig names every host


EVENTS = TrainingJobEvents()
