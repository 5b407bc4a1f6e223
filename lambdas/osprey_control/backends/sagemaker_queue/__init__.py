"""SageMaker training jobs submitted through an AWS Batch SAGEMAKER_TRAINING job queue (backend
``sagemaker-queued``): Batch *service jobs*.

Recognised from EventBridge's Batch Service Job State Change events (ingest); the applier sets the service
job's ``schedulingPriority`` (:mod:`.applier`); its gang reads the training job the service job started
(:mod:`.gang`). What differs from a Batch container job is all here; the queue itself is the deployment's
(``infra/osprey_infra/backends/sagemaker_queue.py``).
"""

from __future__ import annotations

from osprey_control.backends.driver import EventBackend
from osprey_control.backends.sagemaker_queue.applier import ServiceJobApplier
from osprey_control.backends.sagemaker_queue.events import EVENTS
from osprey_control.backends.sagemaker_queue.gang import SageMakerQueuedGang, sagemaker_queued_readiness
from osprey_control.backends.sagemaker_queue.naming import SAGEMAKER_QUEUED_RUNTIME
from osprey_control.registry import Backend

__all__ = ["DRIVER", "SageMakerQueuedGang", "ServiceJobApplier", "sagemaker_queued_readiness"]


DRIVER = EventBackend(
    Backend.SAGEMAKER_QUEUED,
    EVENTS,
    SAGEMAKER_QUEUED_RUNTIME,
    build_applier=lambda deployment: ServiceJobApplier(deployment.client("batch")),
    build_gang=lambda job, deployment: SageMakerQueuedGang(
        job.native_id,
        batch_client=deployment.client("batch"),
        sagemaker_client=deployment.client("sagemaker"),
    ),
)
