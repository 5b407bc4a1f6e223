"""One Slurm discovery pass into the registry: each job under its identity, then reconciliation.

``GET /jobs`` is one complete listing of everything slurmctld knows (a failed call raises before anything here
runs, so a failed listing reconciles nothing). Identity (:mod:`osprey_control.registry.identity`) is
``<cluster>/<job id>@<incarnation>``, the incarnation being the submit time the job was first seen with. Slurm
moves a job's ``submit_time`` when it requeues it (measured on Slurm 22.05: ``scontrol requeue`` set it to the
requeue time and ``restart_cnt`` to 1), so a listed job with ``restart_cnt > 0`` continues the active record of
the same job id whose incarnation is not later than its submit time; a re-created cluster's job of the same id
has ``restart_cnt`` 0 and becomes a new record, and the old one is reconciled away. A requeued job first seen
already finished (its record, if any, is under the incarnation it was first seen with, and ended) is not
recorded again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from osprey_control.backends.reconcile import DEFAULT_GRACE, ReconcileStore, of_cluster, reconcile
from osprey_control.backends.slurm.discovery import SlurmDiscovery, SlurmObservation
from osprey_control.errors import ERROR_CHARS, FAILURE_SAMPLE
from osprey_control.registry import Backend, JobRecord, slurm_job_id

__all__: list[str] = []


def _incarnations(active: list[JobRecord]) -> dict[int, int]:
    """Job id → the incarnation of its active record (legacy ids have none and are reconciled away)."""
    found: dict[int, int] = {}
    for record in active:
        try:
            job = slurm_job_id(record.native_id)
        except ValueError:
            continue
        if job.incarnation is not None:
            found[job.job_id] = job.incarnation
    return found


def _job_id(record: JobRecord) -> int | None:
    try:
        return slurm_job_id(record.native_id).job_id
    except ValueError:
        return None


def identified(found: SlurmDiscovery, active: list[JobRecord]) -> list[SlurmObservation]:
    """``found``'s observations under the identity they continue (module docstring)."""
    known = _incarnations(active)
    result: list[SlurmObservation] = []
    for observation in found.observations:
        incarnation = known.get(observation.job_id)
        if observation.restarts > 0 and incarnation is not None and incarnation <= observation.incarnation:
            result.append(dataclasses.replace(observation, incarnation=incarnation))
        elif observation.restarts > 0 and incarnation is None and not observation.status_active:
            continue  # requeued, then ended: its record (under its first incarnation) has already ended
        else:
            result.append(observation)
    return result


def record_discovery(
    found: SlurmDiscovery,
    registry: ReconcileStore,
    *,
    on_change: Callable[[Any], object] | None = None,
    now: datetime | None = None,
    grace: timedelta = DEFAULT_GRACE,
) -> dict[str, Any]:
    """Record ``found`` (one complete listing of its cluster) and reconcile the cluster; counts only."""
    active = of_cluster(registry.list_active(backend=Backend.SLURM), Backend.SLURM, found.cluster)
    observations = identified(found, active)
    recorded, unrecorded = 0, []
    for observation in observations:
        try:
            written = registry.apply_observation(observation.to_observation())
            recorded += 1
            if on_change is not None and written.changed:
                on_change(written.record)
        except Exception as error:  # one job's write must not lose the others' (retried next pass)
            unrecorded.append(
                {"job": observation.native_id, "error": f"{type(error).__name__}: {error}"[:ERROR_CHARS]}
            )
    listed = {observation.native_id for observation in observations}
    # A marked job whose marker became invalid is still there: not closed, only not updated until it is fixed.
    troubled = {problem.job_id for problem in found.problems}
    listed.update(record.native_id for record in active if _job_id(record) in troubled)
    report = reconcile(registry, found.cluster, active, listed, now=now or datetime.now(UTC), grace=grace)
    return {
        "recorded": recorded,
        "unrecorded": len(unrecorded),
        "unrecorded_sample": unrecorded[:FAILURE_SAMPLE],
        "reconciled": report.to_dict(),
    }
