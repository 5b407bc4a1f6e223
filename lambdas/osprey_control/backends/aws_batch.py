"""What AWS Batch's two kinds of job share, as their events carry it: container jobs (backend ``batch``,
:mod:`osprey_control.backends.batch`) and service jobs (backend ``sagemaker-queued``,
:mod:`osprey_control.backends.sagemaker_queue`) are both described by a ``JobDetail``, with the same name limit
and statuses (a service job has one more, SCHEDULED).

Statuses: SUBMITTED, PENDING, RUNNABLE → PENDING; STARTING → STARTING; RUNNING → RUNNING; SUCCEEDED; FAILED.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from osprey_control.backends.declared import batch_declared_runtime
from osprey_control.backends.events import UnknownStatusError, optional_text, parse_timestamp, required_text
from osprey_control.backends.limits import MAX_ARN, MAX_HOSTS, MAX_JOB_ID, OverLimitError
from osprey_control.registry import JobStatus

__all__: list[str] = []

# The longest name AWS Batch accepts for a job or a service job.
MAX_NAME = 128
# The statuses after which a job or a service job never runs again.
TERMINAL_STATUSES = frozenset({"SUCCEEDED", "FAILED"})

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


def job_identity(event_id: str, detail: Mapping[str, Any]) -> tuple[str, str, str]:
    """A JobDetail's ``(jobId, status, jobName)``, the name defaulting to the id."""
    job_id = required_text(detail, "jobId", event_id, limit=MAX_JOB_ID)
    status = required_text(detail, "status", event_id)
    return job_id, status, optional_text(detail, "jobName", event_id, MAX_NAME) or job_id


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
