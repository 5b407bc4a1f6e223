"""SageMaker training jobs created directly (backend ``sagemaker``).

Recognised from EventBridge's SageMaker Training Job State Change events (ingest); SageMaker honours no
priority for such a job, so the applier records Osprey's decision as a tag (:mod:`.applier`); its gang is
all-or-nothing readiness and StopTrainingJob (:mod:`.gang`).
"""

from __future__ import annotations

from osprey_control.backends.actuation import Applier
from osprey_control.backends.driver import Deployment
from osprey_control.backends.sagemaker.applier import TrainingJobTagApplier
from osprey_control.backends.sagemaker.events import EVENTS, MAX_NAME
from osprey_control.backends.sagemaker.gang import SageMakerGang, instance_count, sagemaker_readiness
from osprey_control.backends.sagemaker.hosts import sagemaker_hosts
from osprey_control.backends.sagemaker.naming import SAGEMAKER_RUNTIME, SageMakerRuntimeNames
from osprey_control.gang import GangBackend, WatchJob
from osprey_control.registry import Backend

__all__ = [
    "DRIVER",
    "MAX_NAME",
    "SageMakerGang",
    "SageMakerRuntimeNames",
    "TrainingJobTagApplier",
    "instance_count",
    "sagemaker_hosts",
    "sagemaker_readiness",
]


class _SageMakerDriver:
    backend = Backend.SAGEMAKER
    recognition = "events"
    events = EVENTS  # how ingest reads its events (.events)
    # How the in-job runtime names its jobs and hosts (the collector queries those names).
    runtime = SAGEMAKER_RUNTIME

    def applier(self, deployment: Deployment) -> Applier:
        return TrainingJobTagApplier(deployment.client("sagemaker"))

    def gang(self, job: WatchJob, deployment: Deployment) -> GangBackend:
        return SageMakerGang(job.native_id, client=deployment.client("sagemaker"))


DRIVER = _SageMakerDriver()
