"""The ``reservation`` signal of every job of a cycle, computed over whole pools of GPUs at once.

The signal is a property of a pool, not of one job (:mod:`osprey_control.derivation.reservation`): which queued
job the pool's GPUs are kept for, and which jobs would delay it. So it is computed where the cycle sees every
active job at once, the collect step, after the job-level values (``remaining_time``, ``queue_wait``) are
known, and stored with them in each shard's collection for derive to read. A pool is one backend's queue or
cluster: (backend, EKS/Slurm cluster or Batch/SageMaker job queue).

Each job enters its pool with what the registry knows: its GPUs (``requested_gpus``; a job of unknown size is
left out of the plan), whether it holds them, its predicted remaining time, its place in the policy's order
(its last derived priority, else its policy's ``initialPriority``), how long it has waited, and, when running,
how long it has held its GPUs and on which attempt. A job whose collection failed or whose policy is not
deployed still takes its place in the pool (it holds or wants GPUs), but gets no value.

A shard whose collection was not stored collects for itself in derive and gets no reservation values (it
sees only its own part of each pool): its jobs' ``reservation`` rules have no data that cycle.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from osprey_control.derivation import (
    RESERVATION_NOTE,
    CompiledPolicy,
    PolicyLookup,
    PoolJob,
    plan_reservations,
    pool_settings,
    reservation_of,
)
from osprey_control.metrics.collector import CollectionResult
from osprey_control.policy import Metric
from osprey_control.registry import JobKey, JobRecord, JobStatus

__all__ = ["add_reservations", "pool_of"]

RESERVATION_METRIC = Metric.RESERVATION.value

_HOLDING = frozenset({JobStatus.STARTING, JobStatus.RUNNING})


def pool_of(record: JobRecord) -> tuple[str, str]:
    """The pool of GPUs a job competes in: its backend and its cluster or job queue."""
    return record.backend.value, record.cluster or record.job_queue or ""


def group_by_pool(records: Iterable[JobRecord]) -> dict[tuple[str, str], list[JobRecord]]:
    """Every job by its pool (:func:`pool_of`), jobs of unknown size included: the callers decide what a job
    without ``requested_gpus`` means to them (the plan leaves it out; the guard pins it with its pool)."""
    pools: dict[tuple[str, str], list[JobRecord]] = defaultdict(list)
    for record in records:
        pools[pool_of(record)].append(record)
    return pools


class CompiledPolicies:
    """The deployed policy of each job, looked up once per name (None: not deployed, or invalid with no good
    version: the job still holds or wants GPUs in its pool, but gets no value)."""

    def __init__(self, policies: PolicyLookup) -> None:
        self._policies = policies
        self._cache: dict[str, CompiledPolicy | None] = {}

    def of(self, record: JobRecord) -> CompiledPolicy | None:
        name = record.policy
        if name not in self._cache:
            try:
                self._cache[name] = self._policies.get(name)
            except LookupError:
                self._cache[name] = None
        return self._cache[name]


def holds_gpus(record: JobRecord) -> bool:
    """STARTING or RUNNING: the job has its GPUs (a starting job's are allocated, only not training yet)."""
    return record.status in _HOLDING


def held_seconds(record: JobRecord, now: datetime) -> float:
    """How long a job holding GPUs has held them in its current allocation (0 when it holds none)."""
    spans = record.allocations.spans()
    if holds_gpus(record) and spans and spans[-1].end is None:
        return max(0.0, (now - spans[-1].start).total_seconds())
    return 0.0


def pool_job(
    record: JobRecord, policy: CompiledPolicy | None, values: Mapping[str, float], now: datetime
) -> PoolJob:
    """The job as the reservation plan sees it (module docstring); ``values``: its collected job-level values."""
    assert record.requested_gpus is not None
    rank = record.derived_priority
    if rank is None:
        rank = policy.initial_priority if policy is not None else 50
    return PoolJob(
        key=record.key,
        gpus=record.requested_gpus,
        running=holds_gpus(record),
        remaining_s=values.get("remaining_time"),
        rank=float(rank),
        waited_s=values.get("queue_wait", 0.0),
        held_s=held_seconds(record, now),
        attempts=max(1, len(record.allocations.spans())),
        may_yield=policy is not None and policy.lets_jobs_yield,
    )


def pool_jobs(
    members: Sequence[JobRecord],
    compiled: Mapping[JobKey, CompiledPolicy | None],
    result: CollectionResult,
    now: datetime,
) -> list[PoolJob]:
    """The pool's jobs of known size as the plan sees them, from their collected values."""
    jobs: list[PoolJob] = []
    for record in members:
        metrics = result.metrics.get(record.key)
        values = metrics.job_values if metrics is not None else {}
        jobs.append(pool_job(record, compiled[record.key], values, now))
    return jobs


def add_reservations(
    records: Sequence[JobRecord], result: CollectionResult, policies: PolicyLookup, *, now: datetime
) -> int:
    """Add ``reservation`` (and its note) to the collected values of every job whose policy reads it.

    Returns how many jobs got a value. ``result.metrics`` is updated in place.
    """
    lookup = CompiledPolicies(policies)
    added = 0
    for everyone in group_by_pool(records).values():
        # A job of unknown size cannot be placed: it is left out of the plan (and gets no value).
        members = [record for record in everyone if record.requested_gpus is not None]
        compiled = {record.key: lookup.of(record) for record in members}
        settings = pool_settings(policy for policy in compiled.values() if policy is not None)
        if settings is None:
            continue
        jobs = pool_jobs(members, compiled, result, now)
        plan = plan_reservations(jobs, settings.capacity_gpus, yield_fraction=settings.yield_fraction)
        for record in members:
            policy = compiled[record.key]
            metrics = result.metrics.get(record.key)
            if metrics is None or policy is None or not policy.reads_reservation:
                continue
            key: Hashable = record.key
            reservation = reservation_of(plan, key)
            result.metrics[record.key] = replace(
                metrics,
                job_values={**metrics.job_values, RESERVATION_METRIC: reservation.value},
                notes={**metrics.notes, RESERVATION_NOTE: reservation.describe()},
            )
            added += 1
    return added
