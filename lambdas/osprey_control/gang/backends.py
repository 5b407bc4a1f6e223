"""What each backend can do for a gang: observe readiness, suspend/resume (requeue) and stop (fail).

| backend | readiness | serial | requeue | fail |
|---|---|---|---|---|
| SageMaker direct | all hosts at SecondaryStatus Training | yes | impossible: SageMaker starts a job's hosts together and cannot return a started job to a queue; applied as serial | StopTrainingJob |
| SageMaker via Batch | the attempt's TrainingJobArn, as above | yes | impossible for the same reason; applied as serial | TerminateServiceJob |
| Batch (multi-node) | node jobs `jobId#N` RUNNING | yes | impossible: Batch has no suspend, a resubmission is a new job; applied as serial | TerminateJob |
| EKS | pods Ready | yes | Workload `spec.active=false` then `true` (Kueue), else the job's `suspend` | suspended for good |

``fail`` stops only jobs tagged ``osprey:enabled=true`` (labelled ``osprey.aws/enabled=true`` on Kubernetes);
an untagged job is left alone and the refusal is recorded.
"""

from __future__ import annotations

from typing import Any, Protocol

from osprey_control.aws import client_for
from osprey_control.contract import ENABLED_TAG
from osprey_control.errors import PermanentError
from osprey_control.gang.decision import Readiness
from osprey_control.gang.readiness import batch_readiness, sagemaker_queued_readiness, sagemaker_readiness

__all__ = [
    "BatchGang",
    "GangBackend",
    "NotOptedInError",
    "SageMakerGang",
    "SageMakerQueuedGang",
]

STOP_REASON = "Osprey: gang not ready within its timeout (fallback fail)"


class NotOptedInError(PermanentError):
    """The job is not tagged ``osprey:enabled=true``: Osprey never stops it (asking again cannot change that)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="not-opted-in")


class GangBackend(Protocol):
    supports_requeue: bool

    def readiness(self) -> Readiness: ...
    def suspend(self) -> None: ...
    def resume(self) -> None: ...
    def stop(self) -> None: ...


def _enabled(tags: dict[str, str]) -> bool:
    return str(tags.get(ENABLED_TAG, "")).strip().lower() == "true"


class _NoRequeue:
    supports_requeue = False

    def suspend(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot requeue (see the module docstring)")

    def resume(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot requeue (see the module docstring)")


class SageMakerGang(_NoRequeue):
    def __init__(self, training_job_name: str, *, client: Any = None) -> None:
        self._name = training_job_name
        self._client = client

    def readiness(self) -> Readiness:
        return sagemaker_readiness(self._name, client=self._sagemaker())

    def stop(self) -> None:
        sagemaker = self._sagemaker()
        arn = sagemaker.describe_training_job(TrainingJobName=self._name)["TrainingJobArn"]
        tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn).get("Tags", [])}
        if not _enabled(tags):
            raise NotOptedInError(f"training job {self._name} is not tagged {ENABLED_TAG}=true")
        sagemaker.stop_training_job(TrainingJobName=self._name)

    def _sagemaker(self) -> Any:
        self._client = client_for("sagemaker", self._client)
        return self._client


class SageMakerQueuedGang(_NoRequeue):
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
        if not _enabled(job.get("tags") or {}):
            raise NotOptedInError(f"service job {self._job_id} is not tagged {ENABLED_TAG}=true")
        batch.terminate_service_job(jobId=self._job_id, reason=STOP_REASON)


class BatchGang(_NoRequeue):
    def __init__(self, job_id: str, *, client: Any = None) -> None:
        self._job_id = job_id
        self._client = client

    def readiness(self) -> Readiness:
        self._client = client_for("batch", self._client)
        return batch_readiness(self._job_id, client=self._client)

    def stop(self) -> None:
        batch = self._client = client_for("batch", self._client)
        jobs = batch.describe_jobs(jobs=[self._job_id]).get("jobs") or []
        if not jobs or not _enabled(jobs[0].get("tags") or {}):
            raise NotOptedInError(f"Batch job {self._job_id} is not tagged {ENABLED_TAG}=true")
        batch.terminate_job(jobId=self._job_id, reason=STOP_REASON)
