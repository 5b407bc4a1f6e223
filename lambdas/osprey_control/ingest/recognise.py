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

A job that opts in with an invalid contract value (``osprey:enabled=True``: only exactly ``true`` opts in,
:mod:`osprey_control.contract.opt_in`) is not managed: it is logged with the reason and ignored, the reason in
the outcome says what to write.

Opt-in tags added after a job's first event count: an event that carries the opt-in tag itself is decided from
the event (that costs no lookup, so no cached answer overrides it), and a cached "not managed" expires after
:data:`NOT_MANAGED_TTL_S`, so the next event of a job tagged since is looked up again (docs/registry.md, Ingest).
The lookups' AWS errors are classified here (:func:`osprey_control.errors.classified`): throttling and 5xx are
a :class:`~osprey_control.errors.TransientError`, a refusal (no such job, access denied) a
:class:`~osprey_control.errors.PermanentError`; ingest then tells the role's refusals (access denied: the
deployment's fault, dead-lettered) from the job's (no such job: dropped), :mod:`.faults`.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from osprey_control.aws import client_for
from osprey_control.backends import JobDescription, JobEvent
from osprey_control.contract import ENABLED_TAG, OspreyBlock, OspreyBlockError, opted_in, recognise_job
from osprey_control.errors import classified
from osprey_control.ingest.events import job_events
from osprey_control.registry import JobKey

__all__ = ["NOT_MANAGED_TTL_S", "Recogniser", "Recognition"]

logger = logging.getLogger(__name__)

# How long a "not managed" answer is reused for a job's later events (seconds). Short enough that a job tagged
# after its first event is managed from its next event a few minutes later; long enough that the burst of
# events of one unmanaged job (submitted, pending, runnable, starting, within a minute) costs one lookup.
NOT_MANAGED_TTL_S = 300.0


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
    reason: str = ""  # why the job is not managed (what to write instead, for an invalid opt-in)


_NOT_MANAGED = Recognition(None, "none", reason="not an Osprey job")


class Recogniser:
    """Recognise Osprey jobs; clients are created on first use when not passed."""

    def __init__(
        self,
        *,
        sagemaker: Any = None,
        batch: Any = None,
        by_environment: bool = True,
        cache_size: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clients = LazyClients(sagemaker=sagemaker, batch=batch)
        self.by_environment = by_environment
        # Per job: the answer and when it was made (clock seconds); "not managed" answers expire.
        self._cache: OrderedDict[JobKey, tuple[Recognition, float]] = OrderedDict()
        self._cache_size = cache_size
        self._clock = clock

    def recognise(self, event: JobEvent) -> Recognition:
        key = JobKey(event.backend, event.native_id)
        now = self._clock()
        # An event that opts its job in by its own tags is decided from them: no lookup, so no cached answer
        # (made before the job was tagged) may override it.
        carries_opt_in = event.tags is not None and ENABLED_TAG in event.tags
        cached = None if carries_opt_in else self._cache.get(key)
        if cached is not None:
            result, made = cached
            if result.block is not None or now - made < NOT_MANAGED_TTL_S:
                self._cache.move_to_end(key)
                return result
        with classified():
            description = job_events(event.backend).describe(
                event, self.clients, by_environment=self.by_environment
            )
            result = _NOT_MANAGED if description is None else self._decide(event, description)
        self._cache[key] = (result, now)
        self._cache.move_to_end(key)
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
            return Recognition(None, "none", reason=f"not managed: {str(error)[:500]}")
        if block is None:
            return _NOT_MANAGED
        how = "tags" if opted_in(ENABLED_TAG, tags) else "environment"
        return Recognition(block, how, dict(tags) if tags else None, description)
