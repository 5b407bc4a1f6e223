"""SageMaker training jobs created directly (backend ``sagemaker``).

Recognised from EventBridge's SageMaker Training Job State Change events (ingest); SageMaker honours no
priority for such a job, so the applier records Osprey's decision as a tag (:mod:`.applier`); its gang is
all-or-nothing readiness and StopTrainingJob (:mod:`.gang`).
"""

from __future__ import annotations

from osprey_control.backends.driver import EventBackend
from osprey_control.backends.sagemaker.applier import TrainingJobTagApplier
from osprey_control.backends.sagemaker.events import EVENTS, MAX_NAME
from osprey_control.backends.sagemaker.gang import SageMakerGang, instance_count, sagemaker_readiness
from osprey_control.backends.sagemaker.hosts import sagemaker_hosts
from osprey_control.backends.sagemaker.naming import SAGEMAKER_RUNTIME, SageMakerRuntimeNames
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


DRIVER = EventBackend(
    Backend.SAGEMAKER,
    EVENTS,
    SAGEMAKER_RUNTIME,
    build_applier=lambda deployment: TrainingJobTagApplier(deployment.client("sagemaker")),
    build_gang=lambda job, deployment: SageMakerGang(job.native_id, client=deployment.client("sagemaker")),
)
