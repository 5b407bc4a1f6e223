"""What a job event must say about its job before ingest records it: an id that forms a valid key, an ARN that
names that job, and times AWS could have stamped. Checked after the backend parsed the event (which bounds
each field's type and length) and before anything reaches the registry.

=========================  =====================================================  =============================
check                      accepted                                               else (dropped as ``malformed``)
=========================  =====================================================  =============================
job id (native id)         1..128 of ``A-Z a-z 0-9 . _ : -``, starting with a     a hostile id such as ``#0``
                           letter or digit (a SageMaker training job name, a      stores an empty id and every
                           Batch job or service job id, an array child            later apply fails on it
                           ``<id>:<index>``)
node job id                ``<job id>#<index>``: a valid job id, a decimal        the same
                           index of at most 4 digits
ARN                        ``arn:<partition>:<service>:<region>:<account>:``      an event claiming one job and
                           then the backend's resource type and this job's id     naming another (the SageMaker
                           (SageMaker lower-cases the name in its ARNs)           applier tags by ARN)
submitted time             2000 .. the function's clock + 1 h, as the event time  a far-past or far-future time
                                                                                  skews queue wait and ordering
=========================  =====================================================  =============================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from osprey_control.backends import JobEvent, MalformedEventError
from osprey_control.ingest.limits import check_time
from osprey_control.registry import Backend

__all__ = ["check_job_event"]

_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_NODE_INDEX = re.compile(r"[0-9]{1,4}")
_ALLOWED = "1..128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
# Each event backend's ARN: (service, resource type, whether the service lower-cases the id in it).
_ARN: Mapping[Backend, tuple[str, str, bool]] = {
    Backend.SAGEMAKER: ("sagemaker", "training-job/", True),
    Backend.BATCH: ("batch", "job/", False),
    Backend.SAGEMAKER_QUEUED: ("batch", "service-job/", False),
}


def _check_id(event: JobEvent, parent_id: str | None) -> None:
    if parent_id is None:
        if not _JOB_ID.fullmatch(event.native_id):
            raise MalformedEventError(
                f"the job id {event.native_id!r:.100} cannot form a job key; allowed: {_ALLOWED}",
                event_id=event.event_id,
            )
        return
    node = event.native_id[len(parent_id) + 1 :]
    if not _JOB_ID.fullmatch(parent_id) or not _NODE_INDEX.fullmatch(node):
        raise MalformedEventError(
            f"the node job id {event.native_id!r:.100} cannot form a job key; allowed: <job id>#<node index> "
            f"with a job id of {_ALLOWED} and an index of 1..4 digits",
            event_id=event.event_id,
        )


def _check_arn(event: JobEvent) -> None:
    if event.arn is None or event.backend not in _ARN:
        return
    service, resource_type, lowered = _ARN[event.backend]
    parts = event.arn.split(":", 5)
    expected = resource_type + event.native_id
    resource = parts[5] if len(parts) == 6 else ""
    named = (resource.lower(), expected.lower()) if lowered else (resource, expected)
    if parts[0] != "arn" or not parts[1].startswith("aws") or parts[2] != service or named[0] != named[1]:
        raise MalformedEventError(
            f"the ARN {event.arn!r:.200} does not name this event's job: expected "
            f"arn:aws:{service}:<region>:<account>:{expected}",
            event_id=event.event_id,
        )


def check_job_event(event: JobEvent, parent_id: str | None, now: datetime | None) -> JobEvent:
    """``event`` if its id forms a valid key (``parent_id``: the job a node job belongs to), its ARN names its
    job and its submitted time is one AWS could have stamped (``now``: the function's clock); else
    :class:`MalformedEventError` naming the field and what is allowed."""
    _check_id(event, parent_id)
    _check_arn(event)
    if event.submitted_at is not None:
        check_time(
            event.submitted_at, "the job's submitted time (createdAt / CreationTime)", now, event.event_id
        )
    return event
