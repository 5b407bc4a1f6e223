"""Queue a SageMaker training job through an AWS Batch SAGEMAKER_TRAINING job queue (``SubmitServiceJob``).

Why not ``sagemaker.aws_batch.TrainingQueue.submit`` (present in the installed SDK, 2.257)? It builds the
request the same way, but it creates its own ``boto3.client("batch")`` (no client can be passed in, no
session region), drops ``schedulingPriority`` when it is 0 (``if scheduling_priority:``) and pops the
``Tags`` out of the training request. Osprey needs priority 0 to mean 0, an injectable client, and the
training job itself to carry the ``osprey:*`` tags so the control plane recognises it. So this module
builds the payload with the SDK's own public helpers and calls ``SubmitServiceJob`` itself, returning a
:class:`QueuedTrainingJob`: the SDK's ``TrainingQueuedJob`` whose ``describe()``, ``terminate()`` and
``wait()`` use that same client (the SDK's would again use a default-region client). ``fit(wait=True)``
polls ``DescribeServiceJob`` every 5 seconds (the SDK's interval) until SUCCEEDED or FAILED.

Request: ``jobName`` (the training job name), ``jobQueue`` (block ``queue``), ``serviceJobType``
``SAGEMAKER_TRAINING``, ``serviceRequestPayload`` (the CreateTrainingJob request as JSON, Tags included),
``retryStrategy`` and ``timeoutConfig`` (the SDK's defaults), ``schedulingPriority`` = block
``initial_priority`` mapped linearly 0..100 → 0..9999 (omitted when unset: the control plane applies the
policy's ``initialPriority`` on its first cycle), ``shareIdentifier`` (block ``share_identifier``) and
``tags`` (the training job's tags as a mapping).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from sagemaker.aws_batch.constants import (
    DEFAULT_SAGEMAKER_TRAINING_RETRY_CONFIG,
    DEFAULT_TIMEOUT,
    JOB_STATUS_COMPLETED,
    JOB_STATUS_FAILED,
    POLL_IN_SECONDS,
    SAGEMAKER_TRAINING,
)
from sagemaker.aws_batch.training_queued_job import TrainingQueuedJob
from sagemaker.estimator import _TrainingJob

from osprey_control.contract import OspreyBlock, batch_scheduling_priority, tags_as_dict

__all__ = ["build_service_job_request", "submit_to_queue"]

logger = logging.getLogger(__name__)


class QueuedTrainingJob(TrainingQueuedJob):
    """The SDK's queued job handle, but talking to Batch through the client it was submitted with.

    The SDK's own ``describe()``/``terminate()`` (and so ``wait()``) create a default-region
    ``boto3.client("batch")``, which is the wrong region or account whenever the estimator's session is
    not the default one.
    """

    def __init__(self, job_arn: str, job_name: str, client: Any, *, poll_seconds: float = POLL_IN_SECONDS):
        super().__init__(job_arn, job_name)
        self.client = client
        self.poll_seconds = poll_seconds

    def describe(self) -> dict[str, Any]:
        """``DescribeServiceJob`` through this handle's client."""
        response: dict[str, Any] = self.client.describe_service_job(jobId=self.job_arn)
        return response

    def terminate(self, reason: str | None = "Default terminate reason") -> None:
        """``TerminateServiceJob`` through this handle's client."""
        self.client.terminate_service_job(jobId=self.job_arn, reason=reason)

    def wait(self, timeout: int | None = None) -> dict[str, Any]:
        """Poll until SUCCEEDED or FAILED (or ``timeout`` seconds); the last DescribeServiceJob response."""
        deadline = time.monotonic() + timeout if timeout else None
        response = self.describe()
        while response.get("status") not in (JOB_STATUS_COMPLETED, JOB_STATUS_FAILED):
            if deadline is not None and time.monotonic() > deadline:
                logger.info("queued job wait timed out", extra={"job_arn": self.job_arn, "timeout": timeout})
                break
            time.sleep(self.poll_seconds)
            response = self.describe()
        logger.info(
            "queued job finished waiting", extra={"job_arn": self.job_arn, "status": response.get("status")}
        )
        return response


def build_service_job_request(
    estimator: Any,
    block: OspreyBlock,
    *,
    inputs: Any = None,
    job_name: str | None = None,
    experiment_config: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The ``SubmitServiceJob`` parameters for ``estimator`` (uploads the source code like ``fit()``)."""
    if block.queue is None:
        raise ValueError("the osprey block has no queue; fit() creates the training job directly")
    estimator.prepare_workflow_for_training(job_name)
    # sagemaker leaves this public helper unannotated.
    train_args = _TrainingJob.get_train_args(estimator, inputs, experiment_config or {})  # type: ignore[no-untyped-call]
    payload: dict[str, Any] = estimator.sagemaker_session.get_train_request(**train_args)
    request: dict[str, Any] = {
        "jobName": payload["TrainingJobName"],
        "jobQueue": block.queue,
        "serviceJobType": SAGEMAKER_TRAINING,
        "serviceRequestPayload": json.dumps(payload),
        "retryStrategy": DEFAULT_SAGEMAKER_TRAINING_RETRY_CONFIG,
        "timeoutConfig": DEFAULT_TIMEOUT,
    }
    if block.initial_priority is not None:
        request["schedulingPriority"] = batch_scheduling_priority(block.initial_priority)
    if block.share_identifier is not None:
        request["shareIdentifier"] = block.share_identifier
    tags = tags_as_dict(payload.get("Tags"))
    if tags:
        request["tags"] = tags
    return request


def submit_to_queue(
    estimator: Any,
    block: OspreyBlock,
    *,
    inputs: Any = None,
    job_name: str | None = None,
    experiment_config: dict[str, str] | None = None,
    batch_client: Any = None,
    wait: bool = False,
    poll_seconds: float = POLL_IN_SECONDS,
) -> QueuedTrainingJob:
    """Submit ``estimator`` to the block's queue and return the queued job handle."""
    request = build_service_job_request(
        estimator, block, inputs=inputs, job_name=job_name, experiment_config=experiment_config
    )
    client = batch_client or estimator.sagemaker_session.boto_session.client("batch")
    response = client.submit_service_job(**request)
    logger.info(
        "queued training job",
        extra={"job_name": response["jobName"], "job_arn": response["jobArn"], "queue": block.queue},
    )
    estimator._current_job_name = response["jobName"]
    queued = QueuedTrainingJob(response["jobArn"], response["jobName"], client, poll_seconds=poll_seconds)
    if wait:
        queued.wait()
    return queued
