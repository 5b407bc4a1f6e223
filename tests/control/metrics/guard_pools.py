"""Two Kueue pools as the registry holds them, for the guard's tests (worked through in each test's Given).

- **fragmenting**: 2 nodes of 8 GPUs; a 4-GPU job holds half of node 0 for 5 more hours; queued, oldest first:
  an 8-GPU job of 5 h, a 4-GPU job of 30 min, a 4-GPU job of 2 h. Kueue's native order (submission) starts the
  8-GPU job on node 1 and the 30-minute job beside the running one: every GPU busy. Shortest first (the
  policy) puts the two small jobs on different nodes, and the 8-GPU job cannot start until the 2-hour job ends
  at 2 h: 4 GPUs idle at once, 8 after 30 min. The policy's order loses goodput: the guard stands down.
- **whole**: 16 GPUs, nothing running; queued: a 16-GPU job of 5 h, then a 16-GPU job of 30 min. Either order
  keeps every GPU busy and shortest first waits far less, but it starts the 5-hour job 30 minutes later than
  native does: the guard refuses it ("no job later than native") and stands down.
- **head_blocked** (a SageMaker training queue, one share): 16 GPUs; an 8-GPU job runs for one more hour;
  queued, oldest first: a 16-GPU job of 1 h, which blocks the share until it fits, then an 8-GPU job of 30 min.
  The native order leaves the short job behind the gang for two hours; shortest first runs it now on the free
  GPUs, done before the gang can start at 1 h anyway: less wait, no job later: the guard chooses the policy.

Every job's Workload was created at priority 100 (its WorkloadPriorityClass): all in the same native place.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from osprey_control.contract import parse_block
from osprey_control.derivation import JobMetrics, compile_policy
from osprey_control.derivation.engine import CompiledPolicy
from osprey_control.guard import Model, native_priority
from osprey_control.metrics import CollectionResult, job_values
from osprey_control.policy import load_policy_text
from osprey_control.registry import Backend, JobRecord, JobStatus, NodeKind, NodeRef
from osprey_control.registry.allocation import AllocationMark, Allocations
from tests.control.metrics.helpers import NOW

MINUTE = 60
HOUR = 3600
NATIVE_VALUE = 100  # every Workload's spec.priority as Kueue created it
NATIVE = native_priority(Model.KUEUE, NATIVE_VALUE)  # the Osprey priority that keeps its native place

# Shortest remaining time first, undamped, over a 6 h range, in pools whose GPUs the policy declares; every job
# at or above the policy's initialPriority (50), where Kueue would admit a new job, so that the echoed arrivals
# preempt no one in the lookahead.
POLICY_TEXT = """
apiVersion: osprey.aws/v1
kind: PriorityDerivationPolicy
metadata: {{name: {name}}}
spec:
  derivationRules:
  - {{metric: remaining_time, weight: 1, scaling: inverse, minPriority: 50, maxPriority: 100, range: [0, 21600]}}
  maxPriorityChange: 100
{extra}
"""


def policy_text(name: str = "shortest", extra: str = "  reservation: {capacityGpus: 16}") -> str:
    return POLICY_TEXT.format(name=name, extra=extra)


def compiled(name: str = "shortest", extra: str = "  reservation: {capacityGpus: 16}") -> CompiledPolicy:
    return compile_policy(load_policy_text(policy_text(name, extra), "p.yaml").policies[0].policy)


class Policies:
    """Compiled policies by name, as the collect step reads the deployed ones."""

    def __init__(self, *policies: CompiledPolicy) -> None:
        self.compiled = {policy.name: policy for policy in policies}

    def get(self, name: str) -> CompiledPolicy:
        if name not in self.compiled:
            raise LookupError(name)
        return self.compiled[name]


def job(
    name: str,
    *,
    gpus: int | None,
    hours: float,
    submitted_min_ago: float,
    running_for_min: float | None = None,
    cluster: str = "gpu",
    policy: str = "shortest",
    backend: Backend = Backend.EKS,
    native: int | None = NATIVE_VALUE,
    now: datetime = NOW,
) -> JobRecord:
    """An EKS job of ``gpus`` GPUs declaring ``hours`` (its activeDeadlineSeconds), running for the last
    ``running_for_min`` minutes or queued."""
    running = running_for_min is not None
    allocations = Allocations()
    if running:
        start = now - timedelta(minutes=running_for_min or 0)
        allocations = Allocations().with_mark(AllocationMark(at=start, running=True, gpus=gpus))
    return JobRecord(
        backend=backend,
        native_id=f"{cluster}/ml/{name}/uid-{name}",
        name=name,
        block=parse_block({"priority_derivation_profile": policy}),
        status=JobStatus.RUNNING if running else JobStatus.PENDING,
        status_time=now,
        submitted_at=now - timedelta(minutes=submitted_min_ago),
        cluster=cluster if backend is Backend.EKS else None,
        job_queue=None
        if backend is Backend.EKS
        else f"arn:aws:batch:us-east-1:123456789012:job-queue/{cluster}",
        nodes=(NodeRef(node_id=f"{name}-0", kind=NodeKind.POD, instance_type="p4d.24xlarge"),),
        requested_gpus=gpus,
        declared_runtime_s=int(hours * HOUR),
        allocations=allocations,
        native_priority=native,
    )


def fragmenting(cluster: str = "gpu", policy: str = "shortest", now: datetime = NOW) -> list[JobRecord]:
    where: dict[str, Any] = {"cluster": cluster, "policy": policy, "now": now}
    return [
        job("w-running", gpus=4, hours=6, submitted_min_ago=90, running_for_min=60, **where),
        job("r-big", gpus=8, hours=5, submitted_min_ago=30, **where),
        job("p-short", gpus=4, hours=0.5, submitted_min_ago=20, **where),
        job("q-medium", gpus=4, hours=2, submitted_min_ago=10, **where),
    ]


def whole(cluster: str = "gpu2", policy: str = "shortest") -> list[JobRecord]:
    return [
        job("a-long", gpus=16, hours=5, submitted_min_ago=20, cluster=cluster, policy=policy),
        job("b-short", gpus=16, hours=0.5, submitted_min_ago=10, cluster=cluster, policy=policy),
    ]


def head_blocked(queue: str = "training") -> list[JobRecord]:
    where: dict[str, Any] = {"cluster": queue, "backend": Backend.SAGEMAKER_QUEUED, "native": 50}
    return [
        job("a-running", gpus=8, hours=1.5, submitted_min_ago=40, running_for_min=30, **where),
        job("b-gang", gpus=16, hours=1, submitted_min_ago=20, **where),
        job("c-short", gpus=8, hours=0.5, submitted_min_ago=10, **where),
    ]


QUEUE_POOL = "arn:aws:batch:us-east-1:123456789012:job-queue/training"


def collected(records: list[JobRecord], now: datetime = NOW) -> CollectionResult:
    """What the collector gives these jobs at ``now``: their job-level values from the registry (no node
    series)."""
    return CollectionResult(
        {
            record.key: JobMetrics(
                job_id=str(record.key),
                job_values=job_values(record, end=now),
                backend=record.backend.value,
                name=record.name,
            )
            for record in records
        }
    )
