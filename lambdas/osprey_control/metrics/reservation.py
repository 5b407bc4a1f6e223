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
from collections.abc import Hashable, Sequence
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
from osprey_control.registry import JobRecord, JobStatus

__all__ = ["add_reservations", "pool_of"]

RESERVATION_METRIC = Metric.RESERVATION.value

_HOLDING = frozenset({JobStatus.STARTING, JobStatus.RUNNING})


def pool_of(record: JobRecord) -> tuple[str, str]:
    """The pool of GPUs a job competes in: its backend and its cluster or job queue."""
    return record.backend.value, record.cluster or record.job_queue or ""


def _policy(
    policies: PolicyLookup, name: str, cache: dict[str, CompiledPolicy | None]
) -> CompiledPolicy | None:
    if name not in cache:
        try:
            cache[name] = policies.get(name)
        except LookupError:
            cache[name] = None
    return cache[name]


def _pool_job(
    record: JobRecord, policy: CompiledPolicy | None, values: dict[str, float], now: datetime
) -> PoolJob:
    assert record.requested_gpus is not None
    running = record.status in _HOLDING
    spans = record.allocations.spans()
    held_s = 0.0
    if running and spans and spans[-1].end is None:
        held_s = max(0.0, (now - spans[-1].start).total_seconds())
    rank = record.derived_priority
    if rank is None:
        rank = policy.initial_priority if policy is not None else 50
    return PoolJob(
        key=record.key,
        gpus=record.requested_gpus,
        running=running,
        remaining_s=values.get("remaining_time"),
        rank=float(rank),
        waited_s=values.get("queue_wait", 0.0),
        held_s=held_s,
        attempts=max(1, len(spans)),
        may_yield=policy is not None and policy.lets_jobs_yield,
    )


def add_reservations(
    records: Sequence[JobRecord], result: CollectionResult, policies: PolicyLookup, *, now: datetime
) -> int:
    """Add ``reservation`` (and its note) to the collected values of every job whose policy reads it.

    Returns how many jobs got a value. ``result.metrics`` is updated in place.
    """
    cache: dict[str, CompiledPolicy | None] = {}
    pools: dict[tuple[str, str], list[JobRecord]] = defaultdict(list)
    for record in records:
        if record.requested_gpus is not None:
            pools[pool_of(record)].append(record)
    added = 0
    for members in pools.values():
        compiled = {record.key: _policy(policies, record.policy, cache) for record in members}
        settings = pool_settings(policy for policy in compiled.values() if policy is not None)
        if settings is None:
            continue
        jobs: list[PoolJob] = []
        for record in members:
            metrics = result.metrics.get(record.key)
            values = dict(metrics.job_values) if metrics is not None else {}
            jobs.append(_pool_job(record, compiled[record.key], values, now))
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
