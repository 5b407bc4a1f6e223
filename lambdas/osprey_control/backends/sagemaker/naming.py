"""How the in-job runtime names a SageMaker training job: ``Backend`` ``sagemaker``, ``JobId`` the training
job's name (``TRAINING_JOB_NAME``), ``Host`` the host's ``algo-N`` (``resourceconfig.json``)."""

from __future__ import annotations

from osprey_control.backends.runtime_naming import RuntimeNames
from osprey_control.registry import JobRecord

__all__ = ["SageMakerRuntimeNames"]

# SageMaker names its first host algo-1, where rank 0 runs; it is known before ingest has listed any host.
FIRST_HOST = "algo-1"


class SageMakerRuntimeNames(RuntimeNames):
    """:class:`RuntimeNames`, with ``algo-1`` as the lead host of a job whose hosts are not recorded yet."""

    __slots__ = ()

    def lead_host(self, record: JobRecord) -> str | None:
        return super().lead_host(record) if record.nodes else FIRST_HOST


SAGEMAKER_RUNTIME = SageMakerRuntimeNames("sagemaker")
