"""EKS (backend ``eks``): Kubernetes Jobs, PyTorchJobs and JobSets, with Kueue when the cluster runs it.

Its jobs are discovered (:mod:`.discovery_run`, the EKS discovery function: every configured cluster, jobs
labelled ``osprey.aws/enabled=true``); priorities go to the Kueue Workload's ``spec.priority`` or an annotation
(:mod:`.applier`); gangs are pods Ready, requeued through the Workload's ``active`` or the job's ``suspend``
(:mod:`.gang`). Standard library HTTP only (no ``kubernetes`` package, no kubeconfig): a bearer token from STS
(:mod:`.token`) and a small REST client (:mod:`.client`). See docs/eks.md for the access entry, RBAC and Kueue
priority semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from osprey_control.backends.actuation import Applier
from osprey_control.backends.driver import Deployment
from osprey_control.backends.eks.applier import (
    DEFAULT_KUEUE_PRIORITY_RANGE,
    EksApplier,
    KueuePriorityRange,
)
from osprey_control.backends.eks.client import (
    AdmissionDeniedError,
    ConflictError,
    KubernetesApiError,
    KubernetesClient,
    KubernetesRejectedError,
    KubernetesUnavailableError,
    NotFoundError,
    UnauthorizedError,
)
from osprey_control.backends.eks.connection import ClientCache, cached_connect, connect
from osprey_control.backends.eks.discovery import discover
from osprey_control.backends.eks.discovery_run import run_discovery
from osprey_control.backends.eks.gang import KubernetesGang
from osprey_control.backends.eks.observation import (
    DiscoveryResult,
    EksDiscoveryProblem,
    EksObservation,
    WorkloadRef,
)
from osprey_control.backends.eks.resources import admission_policy, detect_kueue
from osprey_control.backends.eks.settings import EksDiscoveryEnvironment
from osprey_control.backends.eks.token import (
    ClusterEndpoint,
    TokenProvider,
    describe_cluster,
    presigned_token,
)
from osprey_control.backends.runtime_naming import RuntimeNames
from osprey_control.gang import GangBackend, WatchJob
from osprey_control.registry import Backend, JobRecord, eks_job_id

__all__ = [
    "DEFAULT_KUEUE_PRIORITY_RANGE",
    "DRIVER",
    "AdmissionDeniedError",
    "ClientCache",
    "ClusterEndpoint",
    "ConflictError",
    "DiscoveryResult",
    "EksApplier",
    "EksDiscoveryEnvironment",
    "EksDiscoveryProblem",
    "EksObservation",
    "KubernetesApiError",
    "KubernetesClient",
    "KubernetesGang",
    "KubernetesRejectedError",
    "KubernetesUnavailableError",
    "KueuePriorityRange",
    "NotFoundError",
    "TokenProvider",
    "UnauthorizedError",
    "WorkloadRef",
    "admission_policy",
    "cached_connect",
    "connect",
    "describe_cluster",
    "detect_kueue",
    "discover",
    "presigned_token",
    "run_discovery",
]


@cache
def _kueue_version(cluster: str, connector: Callable[[str], KubernetesClient]) -> str | None:
    # Once per cluster per warm container: the gang watch calls every few seconds.
    return detect_kueue(connector(cluster))


@dataclass(frozen=True, slots=True)
class _EksRuntimeNames(RuntimeNames):
    """The in-job runtime names an EKS job ``<namespace>/<name>`` (``OSPREY_JOB_ID``): its registry id without
    the cluster and the uid (registry.identity)."""

    def job_id(self, record: JobRecord) -> str:
        try:
            return eks_job_id(record.native_id).object_name
        except ValueError:
            return record.native_id


class _EksDriver:
    backend = Backend.EKS
    recognition = "discovery"
    # How the in-job runtime names its jobs and hosts (the collector queries those names).
    runtime = _EksRuntimeNames("eks")

    def applier(self, deployment: Deployment) -> Applier:
        return EksApplier(deployment.connectors.get("eks"))

    def gang(self, job: WatchJob, deployment: Deployment) -> GangBackend:
        if not job.cluster:
            raise ValueError(f"EKS gang {job.native_id}: job.cluster is required to reach its cluster")
        where = eks_job_id(job.native_id)  # ValueError names the forms allowed
        connector = deployment.connectors.get("eks") or cached_connect
        return KubernetesGang(
            connector(job.cluster), job.kind, where.namespace, where.name,
            kueue=_kueue_version(job.cluster, connector),
        )  # fmt: skip


DRIVER = _EksDriver()
