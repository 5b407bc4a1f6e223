"""The gang watch execution's input, and the backend adapter for the job it names.

Input (written by :func:`watch_input` when the ingest step registers a co-scheduled job)::

    {"job": {"backend": "eks", "nativeId": "ml/train", "cluster": "gpu", "kind": "PyTorchJob"},
     "policy": "training",
     "settings": {"timeoutSeconds": 120, "requiredMinWorkers": 100, "fallback": "requeue", "maxRequeues": 5}}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from osprey_control.gang.backends import BatchGang, GangBackend, SageMakerGang, SageMakerQueuedGang
from osprey_control.gang.settings import DEFAULT_MAX_REQUEUES, GangSettings
from osprey_control.policy import GangFallback
from osprey_control.registry.model import Backend, JobKey

if TYPE_CHECKING:  # the EKS package (and botocore through its token signer) only for EKS watches
    from osprey_control.eks.client import KubernetesClient

__all__ = ["WatchJob", "WatchRequest", "backend_for", "watch_input"]


class WatchJob(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    backend: Backend
    native_id: str = Field(alias="nativeId", min_length=1)
    cluster: str | None = None  # EKS only
    kind: str = "Job"  # EKS only: Job, PyTorchJob or JobSet

    @property
    def key(self) -> JobKey:
        return JobKey(self.backend, self.native_id)


class WatchSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    timeout_seconds: int = Field(alias="timeoutSeconds", ge=1, le=86_400)
    required_min_workers: int = Field(alias="requiredMinWorkers", ge=1, le=100)
    fallback: GangFallback
    max_requeues: int = Field(default=DEFAULT_MAX_REQUEUES, alias="maxRequeues", ge=0, le=50)

    def to_settings(self) -> GangSettings:
        return GangSettings(self.timeout_seconds, self.required_min_workers, self.fallback, self.max_requeues)


class WatchRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    job: WatchJob
    policy: str = Field(min_length=1)
    settings: WatchSettings


def watch_input(key: JobKey, settings: GangSettings, policy: str, **job: str) -> dict[str, Any]:
    """The execution input for one job (``job`` adds ``cluster``/``kind`` for EKS)."""
    return {
        "job": {"backend": key.backend.value, "nativeId": key.native_id, **job},
        "policy": policy,
        "settings": {
            "timeoutSeconds": settings.timeout_seconds,
            "requiredMinWorkers": settings.required_min_workers,
            "fallback": settings.fallback.value,
            "maxRequeues": settings.max_requeues,
        },
    }


def backend_for(
    job: WatchJob,
    *,
    clients: dict[str, Any] | None = None,
    kubernetes: Callable[[str], tuple[KubernetesClient, str | None]] | None = None,
    slurm_bridge: str | None = None,
) -> GangBackend:
    """The adapter for ``job``. ``clients`` maps service → boto3 client; ``kubernetes(cluster)`` returns a
    client and the Kueue version the cluster serves (None without Kueue)."""
    clients = clients or {}
    if job.backend is Backend.SAGEMAKER:
        return SageMakerGang(job.native_id, client=clients.get("sagemaker"))
    if job.backend is Backend.SAGEMAKER_QUEUED:
        return SageMakerQueuedGang(
            job.native_id, batch_client=clients.get("batch"), sagemaker_client=clients.get("sagemaker")
        )
    if job.backend is Backend.BATCH:
        return BatchGang(job.native_id, client=clients.get("batch"))
    if job.backend is Backend.SLURM:  # through the bridge function in the cluster's VPC (docs/slurm.md)
        from osprey_control.slurm.bridge import SlurmBridgeGang  # noqa: PLC0415 - Slurm watches only

        if not slurm_bridge:
            raise ValueError(f"Slurm gang {job.native_id}: no Slurm bridge function is deployed to reach it")
        return SlurmBridgeGang(slurm_bridge, job.native_id, client=clients.get("lambda"))
    from osprey_control.gang.kubernetes import KubernetesGang  # noqa: PLC0415 - EKS watches only

    if not job.cluster or kubernetes is None:
        raise ValueError(f"EKS gang {job.native_id}: job.cluster and a Kubernetes connector are required")
    namespace, _, name = job.native_id.partition("/")
    if not name:
        raise ValueError(f"EKS job id must be namespace/name, got {job.native_id!r}")
    client, kueue = kubernetes(job.cluster)
    return KubernetesGang(client, job.kind, namespace, name, kueue=kueue)
