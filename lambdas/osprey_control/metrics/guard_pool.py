"""What the collect step's guard (:mod:`osprey_control.metrics.guard`) feeds the lookahead, from the registry.

Each job enters with what production knows, as the simulator's ``osprey.simulate.guard`` builds it from the
simulated registry: its GPUs (a job of unknown size cannot be placed and is left out), whether it holds them
(STARTING or RUNNING), its predicted remaining time (the collected ``remaining_time``), its declared limit less
the time held (what Slurm's backfill plans with), its queue position (``queue_wait``) or the time it has held its
GPUs, its share and its age since submission (what the echoed arrivals are read from).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from osprey_control.backends.batch import decayed_usage, parse_team_share
from osprey_control.catalog import gpus_for_instance_type
from osprey_control.derivation import JobMetrics
from osprey_control.guard import LookJob
from osprey_control.metrics.collector import CollectionResult
from osprey_control.metrics.reservation import held_seconds, holds_gpus
from osprey_control.registry import JobRecord

__all__: list[str] = []

# The node size when no job of the pool names a known instance type: the P-family training instances' 8 GPUs.
DEFAULT_NODE_GPUS = 8
# How fast a share's usage decays in the lookahead: Batch's default shareDecaySeconds, as the simulator's.
SHARE_DECAY_S = 3600.0


def previous_priority(record: JobRecord) -> int | None:
    """The derive step's ``prev`` (``steps.derive._previous``): the candidates' predictions start where the
    derivation will."""
    for value in (record.derived_priority, record.applied_priority, record.block.initial_priority):
        if value is not None:
            return value
    return None


def team(record: JobRecord) -> str:
    """The share a job's usage counts against: on Batch the team behind Osprey's ``osprey-<team>-g<class>``
    identifiers (the lookahead models a team as one share ordered by priority), else its identifier."""
    share = record.share_identifier or record.block.share_identifier
    if not share:
        return "default"
    owned = parse_team_share(share)
    return owned.team if owned is not None else share


def look_job(record: JobRecord, values: Mapping[str, float], now: datetime) -> LookJob:
    """The job of known size as the lookahead sees it (module docstring); ``values``: its collected ones."""
    assert record.requested_gpus is not None
    running = holds_gpus(record)
    held = held_seconds(record, now)
    declared = record.declared_runtime_s
    return LookJob(
        key=record.key,
        gpus=record.requested_gpus,
        running=running,
        remaining_s=values.get("remaining_time"),
        limit_s=None if declared is None else max(0.0, declared - held),
        waited_s=held if running else values.get("queue_wait", 0.0),
        share=team(record),
        age_s=values.get("queue_wait"),
    )


def node_gpus(members: Iterable[JobRecord]) -> int:
    """GPUs per node: the largest of the pool's known instance types, else :data:`DEFAULT_NODE_GPUS`."""
    sizes = [
        gpus
        for record in members
        for node in record.nodes
        if (gpus := gpus_for_instance_type(node.instance_type)) is not None
    ]
    return max(sizes, default=DEFAULT_NODE_GPUS)


def share_usage(members: Iterable[JobRecord], now: datetime) -> dict[str, float]:
    """Each share's decayed GPU usage as of ``now``, from the active jobs' allocation history (the queue's own
    shareDecaySeconds is the Batch applier's to read; the collect step makes no Batch call)."""
    usage: dict[str, float] = {}
    for record in members:
        share = team(record)
        usage[share] = usage.get(share, 0.0) + decayed_usage(
            record.allocation_intervals(), now.timestamp(), SHARE_DECAY_S
        )
    return usage


def metrics_of(record: JobRecord, result: CollectionResult) -> JobMetrics:
    """The job's collected metrics (an empty set for a job the collection lacks, as derive would start from)."""
    return result.metrics.get(record.key) or JobMetrics(
        job_id=str(record.key), backend=record.backend.value, name=record.name
    )
