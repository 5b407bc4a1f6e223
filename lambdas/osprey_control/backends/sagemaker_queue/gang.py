"""Gangs on SageMaker training jobs queued through an AWS Batch service job queue.

The service job's latest attempt names its ``TrainingJobArn``; from then on readiness is the training job's
(:func:`osprey_control.backends.sagemaker.gang.sagemaker_readiness`). ``requeue`` is impossible for the same reason
as on SageMaker and is applied as ``serial``; ``fail`` is TerminateServiceJob, only on a job tagged
``osprey:enabled=true``.
"""

from __future__ import annotations

import json
from typing import Any

from osprey_control.aws import client_for
from osprey_control.backends.actuation import is_enabled
from osprey_control.backends.aws_batch import TERMINAL_STATUSES
from osprey_control.backends.sagemaker import instance_count, sagemaker_readiness
from osprey_control.contract import ENABLED_TAG
from osprey_control.gang import STOP_REASON, NoRequeue, NotOptedInError, Readiness

__all__ = ["SageMakerQueuedGang", "sagemaker_queued_readiness"]


def _training_job_name(arn: str) -> str:
    # arn:aws:sagemaker:<region>:<account>:training-job/<name>
    return arn.rsplit("/", 1)[-1]


def _payload_hosts(payload: str | None) -> int:
    try:
        request = json.loads(payload or "{}")
    except ValueError:
        return 0
    config = request.get("ResourceConfig") if isinstance(request, dict) else None
    return instance_count(config) if isinstance(config, dict) else 0


def sagemaker_queued_readiness(
    service_job_id: str, *, batch_client: Any = None, sagemaker_client: Any = None
) -> Readiness:
    """A SageMaker training job submitted through an AWS Batch service job queue."""
    job = client_for("batch", batch_client).describe_service_job(jobId=service_job_id)
    requested = _payload_hosts(job.get("serviceRequestPayload"))
    status = job.get("status", "")
    if status in TERMINAL_STATUSES or job.get("isTerminated"):
        return Readiness(0, requested, finished=True, detail=f"service job {status}")
    resource = (job.get("latestAttempt") or {}).get("serviceResourceId") or {}
    if resource.get("name") != "TrainingJobArn" or not resource.get("value"):
        return Readiness(0, requested, detail=f"service job {status}, no training job yet")
    return sagemaker_readiness(_training_job_name(str(resource["value"])), client=sagemaker_client)


class SageMakerQueuedGang(NoRequeue):
    def __init__(
        self, service_job_id: str, *, batch_client: Any = None, sagemaker_client: Any = None
    ) -> None:
        self._job_id = service_job_id
        self._batch_client = batch_client
        self._sagemaker_client = sagemaker_client

    def readiness(self) -> Readiness:
        self._batch_client = client_for("batch", self._batch_client)
        self._sagemaker_client = client_for("sagemaker", self._sagemaker_client)
        return sagemaker_queued_readiness(
            self._job_id, batch_client=self._batch_client, sagemaker_client=self._sagemaker_client
        )

    def stop(self) -> None:
        batch = self._batch_client = client_for("batch", self._batch_client)
        job = batch.describe_service_job(jobId=self._job_id)
        if not is_enabled(job.get("tags") or {}):
            raise NotOptedInError(f"service job {self._job_id} is not tagged {ENABLED_TAG}=true")
        batch.terminate_service_job(jobId=self._job_id, reason=STOP_REASON)
