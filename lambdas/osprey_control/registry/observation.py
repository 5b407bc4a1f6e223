"""What one event says about one job, and the convergent merge of it into the registry record.

Pure Python, no AWS import. The merge is a join: for any set of observations, applying them in any order,
any number of times, yields the same record (apart from ``version``, which counts effective writes). Rules:

- **status**: the observation with the greatest ``(STATUS_ORDER rank, -event time, status name)`` wins. A
  status only moves forward; among equal ranks the *earliest* event wins, so ``status_time`` is when the job
  entered its status and, of two terminal statuses, the one that happened first is kept.
- **description** (name, arn, block, queue, share identifier, cluster, Kubernetes kind, tags): from the newest event
  (``observed_at``); equal times are broken by comparing the descriptions, so the result never depends on
  arrival order.
- **submitted_at**: the earliest one seen.
- **nodes**: the union by ``node_id``; a node's ``instance_id`` / ``gpus`` / ``instance_type`` /
  ``node_index`` are the known value (the greater one if two events disagree).
- **spot_risk**: per instance, the greatest risk seen (an instance never becomes safer).
- **declared_runtime_s**, **requested_gpus**: the greatest value seen (they describe one immutable request; an
  event that does not carry them says nothing, so a max of the known values is the join).
- **allocations**: the observation's status becomes one mark (running with its GPUs, or not running) at
  ``status_time`` in the set of marks (``registry.allocation``); unlike ``status`` it does move backwards,
  which is how a retried or requeued job's second attempt is counted.
- **missing_since**: cleared: an observed job is not missing (reconciliation sets it, ``backends.reconcile``).
- **native_priority**: the first value seen, and only while the record has no ``applied_priority``. The one
  exception to the join: once Osprey has written the backend, the field a source reads (a Workload's
  ``spec.priority``, a service job's ``schedulingPriority``) holds Osprey's value, not the job's own, so a later
  observation must never replace what was seen before. Sources observe in time order (discovery passes, a
  job's first event before Osprey can write it), which is what makes "first" well defined in practice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from osprey_control.contract import OspreyBlock
from osprey_control.registry.allocation import AllocationMark, Allocations
from osprey_control.registry.model import (
    STATUS_ORDER,
    Backend,
    JobKey,
    JobRecord,
    JobStatus,
    NodeRef,
)

__all__ = ["JobObservation", "ObservationStore"]

# What one observation may carry at most, whoever made it (ingest, EKS and Slurm discovery): a backstop that
# keeps one job's item far below DynamoDB's 400 KB whatever a source's own bounds miss. The sources' bounds are
# tighter (ingest: osprey_control.backends.limits); these are the loosest of them, so no valid job is refused:
# Kubernetes label keys are up to 317 characters and objects may carry more labels than AWS resources tags.
MAX_ID = 1024
MAX_OBSERVED_TAGS = 200
MAX_OBSERVED_TAG_KEY = 317
MAX_OBSERVED_TAG_VALUE = 2048
MAX_OBSERVED_NODES = 1000


class JobObservation(BaseModel):
    """One job's state as one event (and whatever was looked up for it) describes it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Backend
    native_id: str = Field(min_length=1, max_length=MAX_ID)  # empty: no key (JobKey.parse refuses it)
    name: str = Field(max_length=MAX_ID)
    arn: str | None = Field(default=None, max_length=2048)
    block: OspreyBlock
    status: JobStatus
    event_time: datetime
    submitted_at: datetime | None = None
    nodes: tuple[NodeRef, ...] = Field(default=(), max_length=MAX_OBSERVED_NODES)
    job_queue: str | None = Field(default=None, max_length=2048)
    share_identifier: str | None = Field(default=None, max_length=MAX_ID)
    cluster: str | None = None
    # When the job entered ``status``, if the source says (Kubernetes conditions); else ``event_time``. Lets a
    # polled source date the status precisely while ``event_time`` dates the description.
    status_since: datetime | None = None
    kind: str | None = None  # Kubernetes kind of an EKS job
    tags: dict[str, str] = Field(default_factory=dict)  # tags (AWS) or labels (Kubernetes) of the job
    declared_runtime_s: int | None = Field(default=None, ge=1)  # the job's own runtime limit, seconds
    requested_gpus: int | None = Field(default=None, ge=1)  # GPUs over all its nodes
    # The job's priority in the backend's own terms as the source read it (JobRecord.native_priority).
    native_priority: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)  # int32: Kueue's and Batch's
    # False for observations that say nothing about the job's own state (a Batch multi-node job's node
    # events, dated at the epoch): they add no allocation mark.
    marks_allocation: bool = True

    @field_validator("tags")
    @classmethod
    def _bounded_tags(cls, tags: dict[str, str]) -> dict[str, str]:
        if len(tags) > MAX_OBSERVED_TAGS:
            raise ValueError(
                f"{len(tags)} tags or labels; a job observation holds at most {MAX_OBSERVED_TAGS}"
            )
        for key, value in tags.items():
            if len(key) > MAX_OBSERVED_TAG_KEY or len(value) > MAX_OBSERVED_TAG_VALUE:
                raise ValueError(
                    f"tag {key[:100]!r}: keys hold at most {MAX_OBSERVED_TAG_KEY} characters, values "
                    f"{MAX_OBSERVED_TAG_VALUE}"
                )
        return tags

    @field_validator("event_time", "submitted_at", "status_since")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        # Naive datetimes would compare wrongly against stored UTC times; event times are UTC by definition.
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @property
    def key(self) -> JobKey:
        return JobKey(self.backend, self.native_id)

    @property
    def status_time(self) -> datetime:
        return self.status_since or self.event_time

    @property
    def allocation_mark(self) -> AllocationMark | None:
        if not self.marks_allocation:
            return None
        running = self.status is JobStatus.RUNNING
        return AllocationMark(
            at=self.status_time, running=running, gpus=self.requested_gpus if running else None
        )

    @property
    def instance_ids(self) -> frozenset[str]:
        return frozenset(node.instance_id for node in self.nodes if node.instance_id)


def _status_rank(status: JobStatus, when: datetime) -> tuple[int, float, str]:
    return (STATUS_ORDER[status], -when.timestamp(), status.value)


def status_wins(new: JobStatus, new_time: datetime, old: JobStatus, old_time: datetime) -> bool:
    """Whether an observed status replaces the stored one (see the module docstring)."""
    return _status_rank(new, new_time) > _status_rank(old, old_time)


def _description(source: JobRecord | JobObservation) -> str:
    # A canonical string of the descriptive fields: the tie-breaker for two events with the same time.
    return json.dumps(
        [
            source.name,
            source.arn,
            source.block.as_kwargs(),
            source.job_queue,
            source.share_identifier,
            source.cluster,
            source.kind,
            source.tags,
        ],
        sort_keys=True,
    )


_Comparable = TypeVar("_Comparable", str, int)


def _greater(first: _Comparable | None, second: _Comparable | None) -> _Comparable | None:
    if first is None:
        return second
    if second is None:
        return first
    return max(first, second)


def merge_nodes(old: Iterable[NodeRef], new: Iterable[NodeRef]) -> tuple[NodeRef, ...]:
    """The union of two node lists by ``node_id``, sorted, each field the known (or greater) value."""
    merged: dict[str, NodeRef] = {}
    for node in (*old, *new):
        seen = merged.get(node.node_id)
        if seen is None:
            merged[node.node_id] = node
            continue
        merged[node.node_id] = NodeRef(
            node_id=node.node_id,
            kind=max(seen.kind, node.kind),
            instance_id=_greater(seen.instance_id, node.instance_id),
            gpus=_greater(seen.gpus, node.gpus),
            instance_type=_greater(seen.instance_type, node.instance_type),
            node_index=_greater(seen.node_index, node.node_index),
        )
    return tuple(merged[node_id] for node_id in sorted(merged))


def merge_spot_risk(old: Mapping[str, float], new: Mapping[str, float]) -> dict[str, float]:
    """Per instance, the greater risk; keys sorted so equal maps serialise identically."""
    merged = dict(old)
    for instance_id, risk in new.items():
        merged[instance_id] = max(risk, merged.get(instance_id, risk))
    return {instance_id: merged[instance_id] for instance_id in sorted(merged)}


def _earliest(first: datetime | None, second: datetime | None) -> datetime | None:
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)


def _native(record: JobRecord, observation: JobObservation) -> int | None:
    """The first native priority seen, taken only before Osprey wrote the backend (module docstring)."""
    if record.native_priority is not None or record.applied_priority is not None:
        return record.native_priority
    return observation.native_priority


def merge_observation(
    record: JobRecord | None,
    observation: JobObservation,
    known_risk: Mapping[str, float] | None = None,
) -> JobRecord:
    """``record`` with ``observation`` folded in (a new record when ``record`` is None).

    ``known_risk`` is the spot risk already recorded for the observation's instances (a spot warning can
    arrive before the event that tells which job runs on the instance). ``version`` is left unchanged: the
    registry bumps it when it writes.
    """
    risk = merge_spot_risk(record.spot_risk if record else {}, known_risk or {})
    nodes = merge_nodes(record.nodes if record else (), observation.nodes)
    mark = observation.allocation_mark
    if record is None:
        return JobRecord(
            backend=observation.backend,
            native_id=observation.native_id,
            name=observation.name,
            arn=observation.arn,
            block=observation.block,
            status=observation.status,
            status_time=observation.status_time,
            submitted_at=observation.submitted_at,
            nodes=nodes,
            job_queue=observation.job_queue,
            share_identifier=observation.share_identifier,
            cluster=observation.cluster,
            kind=observation.kind,
            tags=dict(sorted(observation.tags.items())),
            spot_risk=risk,
            observed_at=observation.event_time,
            declared_runtime_s=observation.declared_runtime_s,
            requested_gpus=observation.requested_gpus,
            native_priority=observation.native_priority,
            allocations=Allocations().with_mark(mark) if mark else Allocations(),
        )
    update: dict[str, object] = {
        "nodes": nodes,
        "spot_risk": risk,
        "submitted_at": _earliest(record.submitted_at, observation.submitted_at),
        "declared_runtime_s": _greater(record.declared_runtime_s, observation.declared_runtime_s),
        "requested_gpus": _greater(record.requested_gpus, observation.requested_gpus),
        "native_priority": _native(record, observation),
        "allocations": record.allocations.with_mark(mark) if mark else record.allocations,
        # Observed, so not missing (osprey_control.backends.reconcile counts the grace period from this).
        "missing_since": None,
    }
    if status_wins(observation.status, observation.status_time, record.status, record.status_time):
        update.update(status=observation.status, status_time=observation.status_time)
    observed_at = record.observed_at or record.status_time
    newer = observation.event_time > observed_at
    tie = observation.event_time == observed_at and _description(observation) > _description(record)
    if newer or tie:
        update.update(
            name=observation.name,
            arn=observation.arn,
            block=observation.block,
            job_queue=observation.job_queue,
            share_identifier=observation.share_identifier,
            cluster=observation.cluster,
            kind=observation.kind,
            tags=dict(sorted(observation.tags.items())),
            observed_at=observation.event_time,
        )
    return record.model_copy(update=update)


class ObservationStore(Protocol):
    """The registry as a discovery pass writes it (:class:`osprey_control.registry.JobRegistry`): each
    observation merged as an ingested event is."""

    def apply_observation(self, observation: JobObservation) -> Any: ...
