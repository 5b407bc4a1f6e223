"""Is this job an Osprey job? By its tags, or by its environment when only that is set (docs/design.md §5).

Cheap first: the tags and environment the event carries decide whenever they can. Only what the event lacks
is looked up, once per job per process (an LRU cache, negative answers included, so the dozen events of one
unmanaged job cost at most one lookup):

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

import json
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from osprey_control.aws import client_for
from osprey_control.backends.declared import sagemaker_declared_runtime, sagemaker_requested_gpus
from osprey_control.contract import OspreyBlock, OspreyBlockError, recognise_job, tags_as_dict
from osprey_control.errors import classified
from osprey_control.ingest.events import JobEvent, batch_environment, sagemaker_hosts
from osprey_control.ingest.limits import event_tags
from osprey_control.registry.model import Backend, JobKey, NodeRef

__all__ = ["Recogniser", "Recognition"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Recognition:
    block: OspreyBlock | None
    how: str  # "tags", "environment" or "none"
    # A service job's CreateTrainingJob ResourceConfig (from DescribeServiceJob): its hosts, once it runs.
    resource_config: Mapping[str, Any] | None = None
    tags: Mapping[str, str] | None = None  # the job's tags as read for recognition (stored on the record)
    # A service job's payload StoppingCondition.MaxRuntimeInSeconds (its event carries only Batch's timeout).
    payload_runtime_s: int | None = None

    def hosts(self, event: JobEvent) -> tuple[NodeRef, ...]:
        if event.training_job is None or self.resource_config is None:
            return ()
        return sagemaker_hosts(event.training_job, self.resource_config, event.event_id)

    @property
    def payload_gpus(self) -> int | None:
        """GPUs of a service job's training request (None for other jobs: their events say)."""
        return sagemaker_requested_gpus(self.resource_config)


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
        self._sagemaker, self._batch = sagemaker, batch
        self.by_environment = by_environment
        self._cache: OrderedDict[JobKey, Recognition] = OrderedDict()
        self._cache_size = cache_size

    @property
    def sagemaker(self) -> Any:
        self._sagemaker = client_for("sagemaker", self._sagemaker)
        return self._sagemaker

    @property
    def batch(self) -> Any:
        self._batch = client_for("batch", self._batch)
        return self._batch

    def recognise(self, event: JobEvent) -> Recognition:
        key = JobKey(event.backend, event.native_id)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        with classified():
            if event.backend is Backend.SAGEMAKER:
                result = self._sagemaker_job(event)
            elif event.backend is Backend.BATCH:
                result = self._batch_job(event)
            else:
                result = self._service_job(event)
        self._cache[key] = result
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return result

    def _decide(
        self,
        event: JobEvent,
        tags: Mapping[str, str] | None,
        environment: Mapping[str, str] | None,
        resource_config: Mapping[str, Any] | None = None,
        payload_runtime_s: int | None = None,
    ) -> Recognition:
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
        how = "tags" if "osprey:enabled" in (tags or {}) else "environment"
        return Recognition(block, how, resource_config, dict(tags) if tags else None, payload_runtime_s)

    @staticmethod
    def _tagged(tags: Mapping[str, str] | None) -> bool:
        return tags is not None and "osprey:enabled" in tags

    def _sagemaker_job(self, event: JobEvent) -> Recognition:
        tags = event.tags
        if tags is None and event.arn:
            tags = {}
            for page in self.sagemaker.get_paginator("list_tags").paginate(ResourceArn=event.arn):
                tags.update(tags_as_dict(page.get("Tags")))
        if self._tagged(tags) or not self.by_environment:
            return self._decide(event, tags, None)
        environment = event.environment
        if environment is None:
            described = self.sagemaker.describe_training_job(TrainingJobName=event.native_id)
            environment = {str(k): str(v) for k, v in (described.get("Environment") or {}).items()}
        return self._decide(event, tags, environment)

    def _batch_job(self, event: JobEvent) -> Recognition:
        tags, environment = event.tags, event.environment
        if self._tagged(tags):
            return self._decide(event, tags, None)
        if tags is None and environment is None:
            jobs = self.batch.describe_jobs(jobs=[event.native_id]).get("jobs") or []
            if not jobs:
                return _NOT_MANAGED
            tags = tags_as_dict(jobs[0].get("tags"))
            environment = batch_environment(jobs[0])
        return self._decide(event, tags, environment)

    def _service_job(self, event: JobEvent) -> Recognition:
        described = self.batch.describe_service_job(jobId=event.native_id)
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
        return self._decide(
            event,
            tags,
            {str(k): str(v) for k, v in environment.items()} if isinstance(environment, Mapping) else {},
            resource_config if isinstance(resource_config, Mapping) else None,
            sagemaker_declared_runtime(payload),
        )
