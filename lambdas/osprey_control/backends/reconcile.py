"""Reconciliation: a discovered job that its cluster no longer lists is closed, after a grace period.

A polled backend (EKS discovery, the Slurm bridge) learns that a job ended only by seeing it end. A Job deleted
before the next pass (``ttlSecondsAfterFinished``, ``kubectl delete``), a Slurm job purged after ``MinJobAge``
while discovery was not running, or every job of a cluster re-created under its name is never seen again, and
without this its record stays active for ever: derived, applied, counted in its pool's reservation.

After each **complete and successful** listing of one cluster (every kind listed, every page read; a failed or
partial listing reconciles nothing, because absence from it proves nothing), every active record of that
backend and cluster that the listing did not name is:

1. marked ``missing_since`` = now, the first time (one write; listing it again clears the mark: the
   observation merge resets it);
2. closed once it has been missing for ``grace`` (default 5 minutes, five discovery passes): status
   ``STOPPED`` dated ``missing_since`` (the first time it was known gone; its allocation ends there), through the
   same convergent merge as an observation, and a ``STATUS#`` history item with the reason;
3. closed at once when its id is *legacy* (written before ids named the cluster and the unique id,
   :mod:`osprey_control.registry.identity`): such an id is never listed again, the job continues under its new
   id (docs/decisions.md, "Job identity").

The answer holds counts and a short sample only (it goes into the discovery function's answer).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from osprey_control.errors import ERROR_CHARS, FAILURE_SAMPLE
from osprey_control.registry import (
    Backend,
    JobKey,
    JobObservation,
    JobRecord,
    JobStatus,
    eks_job_id,
    slurm_job_id,
)

__all__: list[str] = []

logger = logging.getLogger(__name__)

DEFAULT_GRACE = timedelta(minutes=5)
HISTORY_RETENTION = timedelta(days=14)  # as the registry's decision history (registry.dynamodb)


class StatusHistory(Protocol):
    def record_status(
        self, key: JobKey, *, status: str, reason: str, now: datetime, expires: int
    ) -> None: ...


class ReconcileStore(Protocol):
    """What reconciliation needs of the registry (:class:`osprey_control.registry.JobRegistry`)."""

    def list_active(self, shard: int | None = None, *, backend: Backend | None = None) -> list[JobRecord]: ...

    def apply_observation(self, observation: JobObservation) -> Any: ...

    def update(self, key: JobKey, change: Callable[[JobRecord | None], JobRecord | None]) -> Any: ...

    @property
    def events(self) -> StatusHistory: ...


@dataclass
class ReconcileReport:
    """What one cluster's reconciliation did: ``missing`` newly marked, ``waiting`` still in their grace
    period, ``closed`` (with a sample of keys and reasons), ``failed`` writes (retried next pass)."""

    cluster: str
    missing: int = 0
    waiting: int = 0
    closed: list[dict[str, str]] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "missing": self.missing,
            "waiting": self.waiting,
            "closed": len(self.closed),
            "closed_sample": self.closed[:FAILURE_SAMPLE],
            "failed": len(self.failed),
            "failed_sample": self.failed[:FAILURE_SAMPLE],
        }


def legacy_id(record: JobRecord) -> bool:
    """Whether the record's native id predates ids with the cluster and the unique id."""
    try:
        if record.backend is Backend.EKS:
            return eks_job_id(record.native_id).legacy
        if record.backend is Backend.SLURM:
            return slurm_job_id(record.native_id).legacy
    except ValueError:
        return True  # an id no discovery can ever list again
    return False


def of_cluster(records: Iterable[JobRecord], backend: Backend, cluster: str) -> list[JobRecord]:
    """The active records of ``backend`` on ``cluster``."""
    return [r for r in records if r.backend is backend and r.cluster == cluster and r.active]


def reconcile(
    store: ReconcileStore,
    cluster: str,
    active: Iterable[JobRecord],
    listed: Collection[str],
    *,
    now: datetime,
    grace: timedelta = DEFAULT_GRACE,
) -> ReconcileReport:
    """Reconcile ``cluster`` after a complete listing that named the native ids ``listed``; ``active`` are the
    cluster's active records as read before the listing was recorded (module docstring)."""
    report = ReconcileReport(cluster)
    for record in active:
        if record.native_id in listed:
            continue
        try:
            if legacy_id(record):
                _close(store, record, now, "superseded: its id predates ids that name the cluster and the "
                       "scheduler's unique id; the job, if it still runs, is tracked under its new id")  # fmt: skip
                report.closed.append({"job": str(record.key), "reason": "legacy id"})
            elif record.missing_since is None:
                store.update(record.key, lambda current: _marked(current, now))
                report.missing += 1
            elif now - record.missing_since >= grace:
                since = record.missing_since.isoformat(timespec="seconds")
                _close(store, record, record.missing_since,
                       f"cluster {cluster} has not listed it since {since} (longer than the {grace} grace period): "
                       "deleted (e.g. ttlSecondsAfterFinished), purged by the scheduler (MinJobAge), or the "
                       "cluster was re-created", at=now)  # fmt: skip
                report.closed.append({"job": str(record.key), "reason": f"not listed since {since}"})
            else:
                report.waiting += 1
        except Exception as error:  # one job's write must not stop the others (retried next pass)
            failure = {"job": str(record.key), "error": f"{type(error).__name__}: {error}"[:ERROR_CHARS]}
            logger.warning("job not reconciled", extra={"cluster": cluster, **failure})
            report.failed.append(failure)
    if report.closed:
        logger.info("jobs closed by reconciliation", extra={"cluster": cluster, "closed": len(report.closed)})
    return report


def _marked(current: JobRecord | None, now: datetime) -> JobRecord | None:
    # Re-checked on the record as it is now: gone, ended, or already marked by another pass writes nothing.
    if current is None or not current.active or current.missing_since is not None:
        return None
    return current.model_copy(update={"missing_since": now})


def _close(
    store: ReconcileStore, record: JobRecord, ended: datetime, reason: str, *, at: datetime | None = None
) -> None:
    """STOPPED at ``ended`` through the observation merge (its allocation ends there), and a history note."""
    noted = at or ended
    store.apply_observation(
        JobObservation(
            backend=record.backend,
            native_id=record.native_id,
            name=record.name,
            arn=record.arn,
            block=record.block,
            status=JobStatus.STOPPED,
            event_time=max(ended, record.observed_at or ended),
            status_since=ended,
            job_queue=record.job_queue,
            share_identifier=record.share_identifier,
            cluster=record.cluster,
            kind=record.kind,
            tags=dict(record.tags),
        )
    )
    store.events.record_status(
        record.key,
        status=JobStatus.STOPPED.value,
        reason=reason,
        now=noted,
        expires=int((noted + HISTORY_RETENTION).timestamp()),
    )
