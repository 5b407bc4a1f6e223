"""Discover Osprey-managed jobs on one Slurm cluster through slurmrestd.

One pass: ``GET /jobs`` (every job slurmctld knows), the Osprey marker in each job's ``comment``
(:mod:`osprey_control.backends.slurm.marker`; the REST listing carries no environment), and, when some managed job
holds nodes, ``GET /nodes`` plus the node → instance mapping (:mod:`osprey_control.backends.slurm.instances`). Each
managed job becomes a :class:`SlurmObservation`, merged into the registry as a ``slurm`` job with native id
``<cluster>/<job id>@<incarnation>`` (:mod:`osprey_control.registry.identity`): a job id is unique within one
cluster *incarnation* only (a cluster re-created under its name counts from 1 again), so the job's submit time
(epoch seconds) is part of its identity; a requeued job keeps the incarnation it was first seen with
(:mod:`osprey_control.backends.slurm.discovery_run`).

Status mapping (``job_state``, the base state before any ``+FLAG``):

=========  ================================================================================================
PENDING    PENDING, REQUEUED, REQUEUE_HOLD, REQUEUE_FED, RESV_DEL_HOLD, SPECIAL_EXIT
STARTING   CONFIGURING (nodes booting: a ParallelCluster dynamic node being launched)
RUNNING    RUNNING, COMPLETING, SUSPENDED, STAGE_OUT, SIGNALING, RESIZING
SUCCEEDED  COMPLETED
FAILED     FAILED, TIMEOUT, NODE_FAIL, BOOT_FAIL, OUT_OF_MEMORY, DEADLINE
STOPPED    CANCELLED, PREEMPTED, REVOKED
=========  ================================================================================================

Times come from the job (submit, start and end times), never from the poll, so a pass over an unchanged
cluster writes nothing. ``declared_runtime_s`` is the time limit (``--time``, minutes in the API);
``requested_gpus`` the job's GPU request (``--gpus``, ``--gres=gpu:N`` per node, or ``gres/gpu`` in its TRES).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from osprey_control.backends.slurm.client import SlurmClient
from osprey_control.backends.slurm.hostlist import expand_hostlist
from osprey_control.backends.slurm.instances import Instance, InstanceMap
from osprey_control.backends.slurm.marker import block_from_comment, marker_fields
from osprey_control.contract import OspreyBlock, OspreyBlockError
from osprey_control.registry import (
    ACTIVE_STATUSES,
    Backend,
    JobObservation,
    JobStatus,
    NodeKind,
    NodeRef,
    SlurmJobId,
    slurm_job_id,
)

__all__ = [
    "SlurmDiscovery",
    "SlurmDiscoveryProblem",
    "SlurmObservation",
    "discover",
    "native_id",
    "parse_native_id",
]

_STATUS: dict[str, JobStatus] = {
    **dict.fromkeys(
        ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"),
        JobStatus.PENDING,
    ),
    "CONFIGURING": JobStatus.STARTING,
    **dict.fromkeys(
        ("RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "RESIZING"), JobStatus.RUNNING
    ),
    "COMPLETED": JobStatus.SUCCEEDED,
    **dict.fromkeys(
        ("FAILED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE"), JobStatus.FAILED
    ),
    **dict.fromkeys(("CANCELLED", "PREEMPTED", "REVOKED"), JobStatus.STOPPED),
}
_GPU_COUNT = re.compile(r"(?:^|[,])(?:gres[:/])?gpu(?::[^:,=]+)?[:=](\d+)")
_GRES_DETAIL = re.compile(r"gpu(?::[^:(]+)?:(\d+)")


def native_id(cluster: str, job_id: int | str, incarnation: int | None = None) -> str:
    return str(SlurmJobId(cluster, int(job_id), incarnation))


def parse_native_id(value: str) -> tuple[str, int]:
    """``<cluster>/<job id>@<incarnation>`` (or the legacy ``<cluster>/<job id>``) → (cluster, job id): where the
    job is on its cluster now; ValueError says what is expected."""
    job = slurm_job_id(value)
    return job.cluster, job.job_id


def job_state(job: Mapping[str, Any]) -> str:
    """The base state: v0.0.38 gives a string (``RUNNING``), later versions a list (``["RUNNING", ...]``)."""
    state = job.get("job_state")
    if isinstance(state, list):
        state = state[0] if state else ""
    return str(state or "").split("+", 1)[0].upper()


def _time(value: Any) -> datetime | None:
    if isinstance(value, Mapping):  # v0.0.39+: {"set": true, "number": N}
        value = value.get("number") if value.get("set", True) else None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return datetime.fromtimestamp(value, UTC)


def job_status(job: Mapping[str, Any]) -> tuple[JobStatus, datetime | None]:
    """The registry status of a job and when it entered it (module docstring)."""
    status = _STATUS.get(job_state(job), JobStatus.PENDING)
    submitted = _time(job.get("submit_time"))
    if status in (JobStatus.RUNNING, JobStatus.STARTING):
        return status, _time(job.get("start_time")) or submitted
    if status is JobStatus.PENDING:
        return status, submitted
    return status, _time(job.get("end_time")) or _time(job.get("start_time")) or submitted


def job_nodes(job: Mapping[str, Any]) -> list[str]:
    """The nodes a job holds (none while pending)."""
    allocated = ((job.get("job_resources") or {}).get("allocated_nodes")) or []
    names = [
        str(node["nodename"]) for node in allocated if isinstance(node, Mapping) and node.get("nodename")
    ]
    if names:
        return names
    return expand_hostlist(str(job.get("nodes") or "")) if job_state(job) != "PENDING" else []


def _count(value: Any) -> int | None:
    if isinstance(value, Mapping):
        value = value.get("number") if value.get("set", True) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def job_gpus(job: Mapping[str, Any]) -> int | None:
    """GPUs over all the job's nodes: ``tres_per_job`` (``--gpus``), else ``tres_per_node`` times the node
    count (``--gres=gpu:N``), else ``gres/gpu`` of the allocated or requested TRES."""
    for key in ("tres_per_job",):
        match = _GPU_COUNT.search(str(job.get(key) or ""))
        if match:
            return int(match.group(1)) or None
    match = _GPU_COUNT.search(str(job.get("tres_per_node") or ""))
    if match:
        nodes = _count(job.get("node_count")) or len(job_nodes(job)) or 1
        return int(match.group(1)) * nodes or None
    for key in ("tres_alloc_str", "tres_req_str"):
        match = _GPU_COUNT.search(str(job.get(key) or ""))
        if match:
            return int(match.group(1)) or None
    return None


def _time_limit(job: Mapping[str, Any]) -> int | None:
    minutes = _count(job.get("time_limit"))
    # INFINITE is 0xFFFFFFFF (or "set": false in later versions): no declared limit.
    return minutes * 60 if minutes is not None and minutes < 0xFFFFFFFE else None


@dataclass(frozen=True)
class SlurmObservation:
    """What one pass saw of one Osprey job on one cluster."""

    cluster: str
    job_id: int
    name: str
    block: OspreyBlock
    status: JobStatus
    status_time: datetime
    submitted_at: datetime | None
    nodes: tuple[NodeRef, ...] = ()
    priority: int | None = None  # Slurm's priority of the job now
    requested_gpus: int | None = None
    declared_runtime_s: int | None = None
    user: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)  # the marker's tags (what opted it in)
    # The job's identity within its cluster's life (module docstring): its submit time, epoch seconds.
    incarnation: int = 0
    restarts: int = 0  # restart_cnt: how often Slurm requeued it (a requeue moves its submit time)

    @property
    def native_id(self) -> str:
        return native_id(self.cluster, self.job_id, self.incarnation)

    @property
    def status_active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    def to_observation(self) -> JobObservation:
        return JobObservation(
            backend=Backend.SLURM,
            native_id=self.native_id,
            name=self.name,
            block=self.block,
            status=self.status,
            # A poll: the description is dated by the job's own last transition, so an unchanged job gives an
            # identical observation and a repeated pass writes nothing.
            event_time=max(self.status_time, self.submitted_at or self.status_time),
            status_since=self.status_time,
            submitted_at=self.submitted_at,
            nodes=self.nodes,
            cluster=self.cluster,
            tags=dict(self.tags),
            requested_gpus=self.requested_gpus,
            declared_runtime_s=self.declared_runtime_s,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": Backend.SLURM.value,
            "cluster": self.cluster,
            "native_id": self.native_id,
            "job_id": self.job_id,
            "incarnation": self.incarnation,
            "name": self.name,
            "block": self.block.as_kwargs(),
            "status": self.status.value,
            "status_time": self.status_time.isoformat(),
            "submitted_at": self.submitted_at.isoformat() if self.submitted_at else None,
            "nodes": [node.model_dump(exclude_none=True, mode="json") for node in self.nodes],
            "priority": self.priority,
            "requested_gpus": self.requested_gpus,
            "declared_runtime_s": self.declared_runtime_s,
            "user": self.user,
        }


@dataclass(frozen=True)
class SlurmDiscoveryProblem:
    """A marked job Osprey cannot manage, and why (reported, never fatal)."""

    cluster: str
    job_id: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "job_id": self.job_id, "message": self.message}


@dataclass
class SlurmDiscovery:
    cluster: str
    observations: list[SlurmObservation] = field(default_factory=list)
    problems: list[SlurmDiscoveryProblem] = field(default_factory=list)
    unmanaged: int = 0  # jobs without the marker

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "observations": [observation.to_dict() for observation in self.observations],
            "problems": [problem.to_dict() for problem in self.problems],
            "unmanaged": self.unmanaged,
        }


def _node_gpus(job: Mapping[str, Any], names: Sequence[str]) -> list[int | None]:
    details = [str(item) for item in job.get("gres_detail") or []]
    gpus: list[int | None] = []
    for index in range(len(names)):
        match = _GRES_DETAIL.search(details[index]) if index < len(details) else None
        gpus.append(int(match.group(1)) if match else None)
    return gpus


def discover(
    client: SlurmClient,
    cluster: str,
    *,
    instances: InstanceMap | None = None,
    now: datetime | None = None,
) -> SlurmDiscovery:
    """Every Osprey job on ``cluster`` (module docstring). ``instances`` maps nodes to EC2 instances."""
    result = SlurmDiscovery(cluster)
    managed: list[tuple[Mapping[str, Any], OspreyBlock, list[str]]] = []
    listed: Mapping[str, Any]
    for listed in client.jobs():
        job_id = listed.get("job_id")
        if not isinstance(job_id, int):
            continue
        try:
            block = block_from_comment(str(listed.get("comment") or ""), strict=False)
        except OspreyBlockError as error:
            result.problems.append(SlurmDiscoveryProblem(cluster, job_id, str(error)))
            continue
        if block is None:
            result.unmanaged += 1
            continue
        managed.append((listed, block, job_nodes(listed)))
    resolved: dict[str, Instance] = {}
    if instances is not None and any(names for _, _, names in managed):
        wanted = {name for _, _, names in managed for name in names}
        resolved = instances.resolve([node for node in client.nodes() if str(node.get("name")) in wanted])
    for job, block, names in managed:
        status, since = job_status(job)
        submitted = _time(job.get("submit_time"))
        refs = []
        for name, gpus in zip(names, _node_gpus(job, names), strict=True):
            instance = resolved.get(name)
            refs.append(
                NodeRef(
                    node_id=name,
                    kind=NodeKind.INSTANCE,
                    instance_id=instance.instance_id if instance else None,
                    instance_type=instance.instance_type if instance else None,
                    gpus=gpus,
                )
            )
        priority = _count(job.get("priority"))
        tags, _ = marker_fields(str(job.get("comment") or ""))
        result.observations.append(
            SlurmObservation(
                cluster=cluster,
                job_id=int(job["job_id"]),
                name=str(job.get("name") or job["job_id"]),
                block=block,
                status=status,
                status_time=since or submitted or now or datetime.now(UTC),
                submitted_at=submitted,
                nodes=tuple(refs),
                priority=priority,
                # The request, else what the allocation holds (an --exclusive job gets every GPU of its nodes).
                requested_gpus=job_gpus(job) or sum(node.gpus or 0 for node in refs) or None,
                declared_runtime_s=_time_limit(job),
                user=str(job.get("user_name") or "") or None,
                tags=tags,
                incarnation=int(submitted.timestamp()) if submitted else 0,
                restarts=_count(job.get("restart_cnt")) or 0,
            )
        )
    return result
