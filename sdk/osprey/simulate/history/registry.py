"""Osprey's own registry: every job item (``JOB#...``/``META``), active or finished, as past jobs, one record
per backend (each replays through its own scheduler's model).

- Submit: ``submitted_at`` (else the first allocation, else the status time); start and end: the first
  allocation's start and, for a finished job, the last allocation's end (``allocations``, what the
  ``attained_service`` signal reads; spans folded into sums are not dated, so the first kept span counts).
  A finished job with no allocation never started.
- GPUs: ``requested_gpus``, else the allocation's; team: the share identifier, else the job queue or cluster;
  limit: ``declared_runtime_s``.
- Reading: one paginated Scan of the job items (``JOB#...``/``META``), decoded by the registry's own codec
  (``item_to_record``, as ``osprey report`` reads them): the active-jobs index holds no finished job.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, Protocol

from osprey.simulate.history.record import PastJob, SchedulerRecord
from osprey_control.registry import JOB_PREFIX, Backend, JobRecord, is_job_pk, item_to_record

__all__ = ["REGISTRY_SCHEDULERS", "read_registry", "records_from_registry"]

# The native model each backend replays through. A SageMaker job created directly is queued by no one; the
# SageMaker training queue's model (FIFO by priority within the queue) is the nearest.
_META = "META"  # the sort key of a job's own item (osprey_control.registry.keys.META, not on the front)
REGISTRY_SCHEDULERS: dict[Backend, str] = {
    Backend.EKS: "kueue",
    Backend.BATCH: "fairshare",
    Backend.SAGEMAKER_QUEUED: "sagemaker-queue",
    Backend.SAGEMAKER: "sagemaker-queue",
    Backend.SLURM: "slurm",
}


class RegistryReader(Protocol):
    """What is read of a ``JobRegistry``: its table and its client."""

    table_name: str

    @property
    def client(self) -> Any: ...


def job_records(registry: RegistryReader) -> Iterator[JobRecord]:
    """Every job item, active or finished: one paginated Scan filtered to ``JOB#`` items' ``META``."""
    paginator = registry.client.get_paginator("scan")
    pages = paginator.paginate(
        TableName=registry.table_name,
        FilterExpression="begins_with(pk, :job) AND sk = :meta",
        ExpressionAttributeValues={":job": {"S": JOB_PREFIX}, ":meta": {"S": _META}},
    )
    for page in pages:
        for item in page.get("Items", []):
            if is_job_pk(item["pk"]["S"]):
                yield item_to_record(item)


def _epoch(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def past_job(record: JobRecord) -> PastJob:
    spans = record.allocations.spans()
    first = spans[0].start if spans else None
    submitted = record.submitted_at or first or record.status_time
    last_end = spans[-1].end if spans else None
    finished = not record.active
    gpus = record.requested_gpus or max((span.gpus or 0 for span in spans), default=0)
    start = _epoch(first)
    return PastJob(
        job_id=str(record.key),  # names repeat (a nightly job); keys do not
        submit=min(_epoch(submitted) or 0.0, start if start is not None else float("inf")),
        start=start,
        end=(_epoch(last_end) or _epoch(record.status_time)) if finished else None,
        gpus=gpus,
        nodes=max(1, len(record.nodes)),
        limit_s=float(record.declared_runtime_s) if record.declared_runtime_s else None,
        team=record.share_identifier or (record.job_queue or record.cluster or "default").rsplit("/", 1)[-1],
        state=record.status.value,
    )


def records_from_registry(records: Iterable[JobRecord], source: str) -> list[SchedulerRecord]:
    """One record per backend present, in :class:`Backend` order."""
    by_backend: dict[Backend, list[PastJob]] = {}
    for record in records:
        by_backend.setdefault(record.backend, []).append(past_job(record))
    return [
        SchedulerRecord(
            format="registry",
            scheduler=REGISTRY_SCHEDULERS[backend],
            source=f"{source} ({backend.value})",
            jobs=tuple(sorted(by_backend[backend], key=lambda job: job.submit)),
        )
        for backend in Backend
        if backend in by_backend
    ]


def read_registry(registry: RegistryReader, source: str) -> list[SchedulerRecord]:
    return records_from_registry(job_records(registry), source)
