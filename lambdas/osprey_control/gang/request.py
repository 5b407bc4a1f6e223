"""The gang watch execution's input. The backend's gang for the job it names comes from
:func:`osprey_control.backends.driver_for`.

Input (written by :func:`watch_input` when the ingest step registers a co-scheduled job)::

    {"job": {"backend": "eks", "nativeId": "ml/train", "cluster": "gpu", "kind": "PyTorchJob"},
     "policy": "training",
     "settings": {"timeoutSeconds": 120, "requiredMinWorkers": 100, "fallback": "requeue", "maxRequeues": 5}}
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from osprey_control.gang.settings import DEFAULT_MAX_REQUEUES, GangSettings
from osprey_control.policy import GangFallback
from osprey_control.registry import Backend, JobKey

__all__ = ["WatchJob", "WatchRequest", "watch_input"]


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
