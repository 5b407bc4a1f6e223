"""Registry records: the shared vocabulary of the ingest, collect, derive and apply steps.

Pure Python (pydantic), no AWS import. The DynamoDB item layout lives in the adapter; this is the domain view.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from osprey_control.contract import OspreyBlock
from osprey_control.registry.allocation import Allocations

if TYPE_CHECKING:
    from osprey_control.derivation import AllocationInterval

__all__ = [
    "ACTIVE_STATUSES",
    "MAX_TRANSIENT_APPLY_ATTEMPTS",
    "STATUS_ORDER",
    "ApplyFailure",
    "Backend",
    "JobKey",
    "JobRecord",
    "JobStatus",
    "NodeKind",
    "NodeRef",
    "decision_changes",
]


class Backend(StrEnum):
    """Where a job runs, which decides how its priority is applied (docs/design.md §6)."""

    SAGEMAKER = "sagemaker"  # a training job created directly: observed and tagged only
    SAGEMAKER_QUEUED = "sagemaker-queued"  # a SageMaker training job behind an AWS Batch service job
    BATCH = "batch"  # an AWS Batch container job (fair-share queue)
    EKS = "eks"  # a Kubernetes Job / PyTorchJob / JobSet, Kueue when present
    SLURM = "slurm"  # a Slurm batch job (ParallelCluster, HyperPod Slurm): ``<cluster>/<job id>``


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
    """Identity: the backend plus the backend's own id (training job name, Batch job id; for the discovered
    backends the cluster and the scheduler's unique id: ``<cluster>/<namespace>/<name>/<uid>``,
    ``<cluster>/<job id>@<submit time>``, :mod:`osprey_control.registry.identity`)."""

    backend: Backend
    native_id: str

    def __str__(self) -> str:
        return f"{self.backend.value}#{self.native_id}"

    @classmethod
    def parse(cls, text: str) -> JobKey:
        """``<backend>#<native id>`` (what ``str()`` gives) back to a key; the native id may contain ``#``.
        ValueError names what is wrong and what is allowed."""
        backend, separator, native_id = text.partition("#")
        allowed = ", ".join(member.value for member in Backend)
        if not separator or not native_id:
            raise ValueError(
                f"a job key is <backend>#<native id> with backend one of {allowed}, got {text!r}"
            )
        try:
            return cls(Backend(backend), native_id)
        except ValueError:
            raise ValueError(f"unknown backend {backend!r} in job key {text!r}; allowed: {allowed}") from None


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
    instance_type: str | None = (
        None  # EC2 / SageMaker instance type (p4d.24xlarge, ml.p5.48xlarge), when known
    )
    # AWS_BATCH_JOB_NODE_INDEX of a Batch multi-node job's node: the runtime's ``Host`` for this node.
    node_index: int | None = Field(default=None, ge=0)


# A priority whose apply keeps failing transiently is retried every cycle until this many consecutive
# failures, then treated like a permanent failure until the derived priority moves (docs/registry.md).
MAX_TRANSIENT_APPLY_ATTEMPTS = 10


class ApplyFailure(BaseModel):
    """Why the derived priority ``priority`` is not on the backend yet (written by the apply step).

    ``permanent``: the backend refused for a reason a retry cannot fix (not opted in, job finished, invalid
    request, no applier); the same priority is not tried again. Otherwise ``attempts`` counts consecutive
    transient failures (throttling, 5xx, connection) of this priority.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    priority: int = Field(ge=0, le=100)
    reason: str
    permanent: bool = False
    attempts: int = Field(default=1, ge=1)
    at: datetime


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
    kind: str | None = None  # the Kubernetes kind (Job, PyTorchJob, JobSet) of an EKS job
    # The job's tags (AWS) or labels (Kubernetes) as last observed: what opted it in, shown by the CLI.
    tags: dict[str, str] = Field(default_factory=dict)
    spot_risk: dict[str, float] = Field(default_factory=dict)  # instance id -> risk (docs/design.md §3)
    # The last priority the derive step decided (the ``prev`` of the next derivation, docs/design.md §4) ...
    derived_priority: int | None = Field(default=None, ge=0, le=100)
    # ... and the one the backend holds: written by the apply step only after a successful backend write.
    applied_priority: int | None = Field(default=None, ge=0, le=100)
    applied_at: datetime | None = None  # when the apply step last confirmed applied_priority on the backend
    apply_failure: ApplyFailure | None = None  # the last failed apply of derived_priority, until one succeeds
    # Shadow mode (osprey_control.steps.mode): the priority the apply step would have written and when it
    # found so; nothing reached the backend, so the job stays pending and its first enforce cycle applies it.
    shadow_priority: int | None = Field(default=None, ge=0, le=100)
    shadow_at: datetime | None = None
    last_decision: dict[str, Any] | None = None  # Decision.to_dict() of the last derivation
    last_changed_at: datetime | None = None  # when derived_priority last changed
    # Event time of the newest event whose descriptive fields (name, arn, block, queue) were applied; the
    # registry keeps the newest description so replays and out-of-order deliveries converge.
    observed_at: datetime | None = None
    # What the job declares (docs/design.md §3 remaining_time budget and requested_gpus), the greatest value seen:
    # SageMaker StoppingCondition / Batch timeout seconds, and GPUs over all nodes.
    declared_runtime_s: int | None = Field(default=None, ge=1)
    requested_gpus: int | None = Field(default=None, ge=1)
    # The job's priority in the backend's own terms as submitted, before Osprey wrote any (a Kueue Workload's
    # ``spec.priority``, a service job's ``schedulingPriority``); None where the backend has none (Slurm and Batch
    # container jobs: every job the same) or it was not seen. The guard's ``native`` order keeps each job here.
    native_priority: int | None = None
    # When the job held its GPUs, over all attempts (registry.allocation; the attained_service signal).
    allocations: Allocations = Field(default_factory=Allocations)
    # When a complete discovery of the job's cluster first did not list it (None: listed by the last one). A job
    # missing for the grace period is closed (osprey_control.backends.reconcile); seeing it again clears this.
    missing_since: datetime | None = None
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

    def allocation_intervals(self) -> list[AllocationInterval]:
        """The job's allocation intervals in epoch seconds; a span whose GPU count is unknown holds the job's
        requested GPUs, or 0 when that is unknown too (the job-level signals and the Batch team fold read these)."""
        # Imported here, not at the top: the registry is loaded by ingest, which never derives, and the
        # derivation front would add the engine and the policy model to its cold start.
        from osprey_control.derivation import AllocationInterval  # noqa: PLC0415

        return [
            AllocationInterval(
                start_s=span.start.timestamp(),
                end_s=span.end.timestamp() if span.end is not None else None,
                gpus=span.gpus or self.requested_gpus or 0,
            )
            for span in self.allocations.spans()
        ]

    def apply_pending(self, max_transient_attempts: int = MAX_TRANSIENT_APPLY_ATTEMPTS) -> bool:
        """Whether the apply step should (re)write ``derived_priority`` to the backend.

        True when the derived priority differs from the applied one, unless that same priority already failed
        permanently or failed transiently ``max_transient_attempts`` times in a row; a new derived priority is
        always tried.
        """
        if self.derived_priority is None or self.derived_priority == self.applied_priority:
            return False
        failure = self.apply_failure
        if failure is None or failure.priority != self.derived_priority:
            return True
        return not failure.permanent and failure.attempts < max_transient_attempts


def decision_changes(current: JobRecord, decision: dict[str, Any], derived_priority: int) -> bool:
    """Whether recording ``decision`` changes the job: a new derived priority or a new reason (``derived``,
    ``damped``, ``deadband``, ``no-data``). The same priority for the same reason is the common case of a
    steady fleet; it is not written, so ``last_decision`` is the last decision that changed something."""
    previous = (current.last_decision or {}).get("reason")
    return current.derived_priority != derived_priority or previous != decision.get("reason")
