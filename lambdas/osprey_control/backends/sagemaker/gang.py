"""Gangs on SageMaker (training jobs created directly): readiness and the ``fail`` fallback.

SageMaker starts a job's hosts together and reports no per-host state before that, so every host is up once
``SecondaryStatus`` reaches ``Training``: readiness is all-or-nothing. ``requeue`` is impossible (SageMaker cannot
return a started job to a queue) and is applied as ``serial``; ``fail`` is StopTrainingJob, only on a job tagged
``osprey:enabled=true``.
"""

from __future__ import annotations

from typing import Any

from osprey_control.aws import client_for
from osprey_control.backends.actuation import is_enabled
from osprey_control.contract import ENABLED_TAG
from osprey_control.gang import NoRequeue, NotOptedInError, Readiness

__all__ = ["SageMakerGang", "instance_count", "sagemaker_readiness"]

_SAGEMAKER_OVER = frozenset({"Completed", "Failed", "Stopping", "Stopped"})
# SecondaryStatus values at or after the point where every host runs the training script.
_SAGEMAKER_TRAINING = frozenset({"Training", "Uploading", "Completed"})


def instance_count(resource_config: dict[str, Any]) -> int:
    groups = resource_config.get("InstanceGroups") or []
    if groups:  # heterogeneous clusters list their hosts per instance group
        return sum(int(group.get("InstanceCount", 0)) for group in groups)
    return int(resource_config.get("InstanceCount", 0))


def sagemaker_readiness(training_job_name: str, *, client: Any = None) -> Readiness:
    job = client_for("sagemaker", client).describe_training_job(TrainingJobName=training_job_name)
    hosts = instance_count(job.get("ResourceConfig") or {})
    status, secondary = job.get("TrainingJobStatus", ""), job.get("SecondaryStatus", "")
    if status in _SAGEMAKER_OVER:
        return Readiness(0, hosts, finished=True, detail=f"training job {status}")
    ready = hosts if secondary in _SAGEMAKER_TRAINING else 0
    return Readiness(ready, hosts, detail=f"SecondaryStatus {secondary}")


class SageMakerGang(NoRequeue):
    def __init__(self, training_job_name: str, *, client: Any = None) -> None:
        self._name = training_job_name
        self._client = client

    def readiness(self) -> Readiness:
        return sagemaker_readiness(self._name, client=self._sagemaker())

    def stop(self) -> None:
        sagemaker = self._sagemaker()
        arn = sagemaker.describe_training_job(TrainingJobName=self._name)["TrainingJobArn"]
        tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn).get("Tags", [])}
        if not is_enabled(tags):
            raise NotOptedInError(f"training job {self._name} is not tagged {ENABLED_TAG}=true")
        sagemaker.stop_training_job(TrainingJobName=self._name)

    def _sagemaker(self) -> Any:
        self._client = client_for("sagemaker", self._client)
        return self._client
