"""Is this job an Osprey job? By its tags, or by its environment when only that is set (docs/design.md §5).

Cheap first: the tags and environment the event carries decide whenever they can. Only what the event lacks
is looked up, by the job's backend (``describe`` of its :class:`~osprey_control.backends.events.JobEvents`),
once per job per process (an LRU cache here, negative answers included, so the dozen events of one unmanaged
job cost at most one lookup):

==================  =================================================  ===========================================
backend             in the event                                       looked up when missing
==================  =================================================  ===========================================
sagemaker           ``detail.Tags`` (map)                              ``ListTags`` (no ``Tags`` key), then
                                                                       ``DescribeTrainingJob`` → ``Environment``
batch               ``detail.tags``, ``detail.container.environment``  ``DescribeJobs`` (neither in the event)
sagemaker-queued    nothing (tags are not in service job events)       ``DescribeServiceJob`` → ``tags``, else the
                                                                       payload's ``Environment``; its
                                                                       ``ResourceConfig`` gives the hosts
                                                                       and GPUs, ``StoppingCondition`` the
                                                                       runtime limit
==================  =================================================  ===========================================

A job that opts in with an invalid contract value is not managed: it is logged with the reason and ignored.
The lookups' AWS errors are classified here (:func:`osprey_control.errors.classified`): throttling and 5xx are
a :class:`~osprey_control.errors.TransientError`, a refusal (no such job, access denied) a
:class:`~osprey_control.errors.PermanentError`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from osprey_control.aws import client_for
from osprey_control.backends import JobDescription, JobEvent
from osprey_control.contract import ENABLED_TAG, OspreyBlock, OspreyBlockError, recognise_job
from osprey_control.errors import classified
from osprey_control.ingest.events import job_events
from osprey_control.registry import JobKey

__all__ = ["Recogniser", "Recognition"]

logger = logging.getLogger(__name__)


class LazyClients:
    """boto3 clients by service: those passed (None: not passed), else created on first use and kept."""

    def __init__(self, **clients: Any) -> None:
        self._clients = {service: client for service, client in clients.items() if client is not None}

    def client(self, service: str) -> Any:
        found = self._clients.get(service)
        if found is None:
            found = self._clients[service] = client_for(service)
        return found


@dataclass(frozen=True, slots=True)
class Recognition:
    block: OspreyBlock | None
    how: str  # "tags", "environment" or "none"
    tags: Mapping[str, str] | None = None  # the job's tags as read for recognition (stored on the record)
    # What the backend read to recognise the job; a service job's payload limit, GPUs and hosts are in it.
    description: JobDescription = field(default_factory=JobDescription)


_NOT_MANAGED = Recognition(None, "none")


class Recogniser:
    """Recognise Osprey jobs; clients are created on first use when not passed."""

    def __init__(
        self,
        *,
        sagemaker: Any = None,
        batch: Any = None,
        by_environment: bool = True,
        cache_size: int = 4096,
    ) -> None:
        self.clients = LazyClients(sagemaker=sagemaker, batch=batch)
        self.by_environment = by_environment
        self._cache: OrderedDict[JobKey, Recognition] = OrderedDict()
        self._cache_size = cache_size

    def recognise(self, event: JobEvent) -> Recognition:
        key = JobKey(event.backend, event.native_id)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        with classified():
            description = job_events(event.backend).describe(
                event, self.clients, by_environment=self.by_environment
            )
            result = _NOT_MANAGED if description is None else self._decide(event, description)
        self._cache[key] = result
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return result

    def _decide(self, event: JobEvent, description: JobDescription) -> Recognition:
        tags, environment = description.tags, description.environment
        try:
            block = recognise_job(tags=tags, environment=environment if self.by_environment else None)
        except OspreyBlockError as error:
            logger.warning(
                "job opts in to Osprey with an invalid contract; it is not managed until it is fixed",
                extra={"job": f"{event.backend.value}#{event.native_id}", "problems": str(error)},
            )
            return _NOT_MANAGED
        if block is None:
            return _NOT_MANAGED
        how = "tags" if ENABLED_TAG in (tags or {}) else "environment"
        return Recognition(block, how, dict(tags) if tags else None, description)
