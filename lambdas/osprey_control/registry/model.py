"""Registry records: the shared vocabulary of the ingest, collect, derive and apply steps.

Pure Python (pydantic), no AWS import. The DynamoDB item layout lives in the adapter; this is the domain view.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from osprey_control.contract import OspreyBlock

__all__ = [
    "ACTIVE_STATUSES",
    "STATUS_ORDER",
    "Backend",
    "JobKey",
    "JobRecord",
    "JobStatus",
    "NodeKind",
    "NodeRef",
]


class Backend(StrEnum):
    """Where a job runs, which decides how its priority is applied (DESIGN §6)."""

    SAGEMAKER = "sagemaker"  # a training job created directly: observed and tagged only
    SAGEMAKER_QUEUED = "sagemaker-queued"  # a SageMaker training job behind an AWS Batch service job
    BATCH = "batch"  # an AWS Batch container job (fair-share queue)
    EKS = "eks"  # a Kubernetes Job / PyTorchJob / JobSet, Kueue when present


class JobStatus(StrEnum):
    PENDING = "PENDING"  # submitted, waiting for capacity (includes Batch SUBMITTED/PENDING/RUNNABLE)
    STARTING = "STARTING"  # capacity allocated, containers/hosts starting
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"


# Events can arrive late or twice: a status only ever moves forward in this order, and an event older than the
# one already applied never moves it at all. Terminal statuses share the top rank, so the first one wins.
STATUS_ORDER: dict[JobStatus, int] = {
    JobStatus.PENDING: 0,
    JobStatus.STARTING: 1,
    JobStatus.RUNNING: 2,
    JobStatus.SUCCEEDED: 3,
    JobStatus.FAILED: 3,
    JobStatus.STOPPED: 3,
}
ACTIVE_STATUSES = frozenset({JobStatus.PENDING, JobStatus.STARTING, JobStatus.RUNNING})


class JobKey(NamedTuple):
    """Identity: the backend plus the backend's own id (training job name, Batch job id, ``namespace/name``)."""

    backend: Backend
    native_id: str

    def __str__(self) -> str:
        return f"{self.backend.value}#{self.native_id}"


class NodeKind(StrEnum):
    INSTANCE = "instance"  # an EC2 instance (Batch, EKS node): CWAgent metrics by InstanceId
    HOST = "host"  # a SageMaker training host (algo-1, ...): /aws/sagemaker/TrainingJobs Host dimension
    POD = "pod"  # a Kubernetes pod: Container Insights pod metrics


class NodeRef(BaseModel):
    """One place a job runs. ``instance_id`` links a host or pod to its EC2 instance when known (spot events
    and CWAgent metrics are per instance)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_id: str
    kind: NodeKind
    instance_id: str | None = None
    gpus: int | None = Field(default=None, ge=0, description="GPUs on this node, when known")


class JobRecord(BaseModel):
    """Everything the control plane keeps about one managed job."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Backend
    native_id: str
    name: str
    arn: str | None = None
    block: OspreyBlock
    status: JobStatus
    status_time: datetime  # event time of the event that set ``status``
    submitted_at: datetime | None = None  # for queue_wait
    nodes: tuple[NodeRef, ...] = ()
    job_queue: str | None = None  # AWS Batch job queue ARN (batch, sagemaker-queued)
    share_identifier: str | None = None
    cluster: str | None = None  # EKS cluster name
    spot_risk: dict[str, float] = Field(default_factory=dict)  # instance id -> risk (DESIGN §3)
    applied_priority: int | None = Field(default=None, ge=0, le=100)
    last_decision: dict[str, Any] | None = None  # Decision.to_dict() of the last derivation
    last_changed_at: datetime | None = None  # when applied_priority last changed
    # Event time of the newest event whose descriptive fields (name, arn, block, queue) were applied; the
    # registry keeps the newest description so replays and out-of-order deliveries converge.
    observed_at: datetime | None = None
    version: int = 0  # optimistic concurrency: every write is conditional on the version read

    @property
    def key(self) -> JobKey:
        return JobKey(self.backend, self.native_id)

    @property
    def policy(self) -> str:
        return self.block.priority_derivation_profile

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES
