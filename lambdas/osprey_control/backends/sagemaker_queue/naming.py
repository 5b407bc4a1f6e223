"""How the in-job runtime names a SageMaker training job behind a Batch service job: as any SageMaker job
(the runtime sees only the training job), so ``JobId`` is the training job's name, not the service job id."""

from __future__ import annotations

from osprey_control.backends.sagemaker import SageMakerRuntimeNames
from osprey_control.registry import JobRecord

__all__: list[str] = []


class SageMakerQueuedRuntimeNames(SageMakerRuntimeNames):
    """:class:`SageMakerRuntimeNames` keyed by the record's ``name``: a queued job's native id is its Batch
    service job id, while the runtime (and SageMaker's own metrics) name the training job."""

    __slots__ = ()

    def job_id(self, record: JobRecord) -> str:
        return record.name


SAGEMAKER_QUEUED_RUNTIME = SageMakerQueuedRuntimeNames("sagemaker")
