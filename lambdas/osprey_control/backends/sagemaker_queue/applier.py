"""The applier for SageMaker training jobs submitted through an AWS Batch SAGEMAKER_TRAINING job queue
(``sagemaker-queued``, docs/design.md §6): such a job is a Batch *service job*, and its priority is
``UpdateServiceJob`` ``schedulingPriority``, Osprey's 0..100 mapped onto 0..9999 by
:func:`osprey_control.contract.batch_scheduling_priority`. ``record.native_id`` is the service job id.

It reads the live service job first (DescribeServiceJob): that is where ``osprey:enabled`` is checked, and a value
already in place is not written again.
"""

from __future__ import annotations

import logging

from osprey_control.backends.actuation import LiveJob, PriorityChange, ReadThenWriteApplier
from osprey_control.backends.aws_batch import TERMINAL_STATUSES
from osprey_control.contract import batch_scheduling_priority
from osprey_control.registry import Backend

__all__ = ["ServiceJobApplier"]

logger = logging.getLogger(__name__)


class ServiceJobApplier(ReadThenWriteApplier):
    """``UpdateServiceJob`` for SageMaker training jobs queued through AWS Batch."""

    backends = frozenset({Backend.SAGEMAKER_QUEUED})
    service = "batch"

    def _read(self, change: PriorityChange) -> LiveJob:
        job = self.client.describe_service_job(jobId=change.record.native_id)
        current = job.get("schedulingPriority")
        status = job.get("status")
        return LiveJob(
            job.get("tags"),
            None if current is None else str(current),
            str(batch_scheduling_priority(change.priority)),
            skip=f"service job is {status}" if status in TERMINAL_STATUSES else None,
        )

    def _write(self, change: PriorityChange, live: LiveJob) -> None:
        target = int(live.target)
        self.client.update_service_job(jobId=change.record.native_id, schedulingPriority=target)
        logger.info(
            "service job priority updated",
            extra={"job": str(change.record.key), "priority": change.priority, "scheduling_priority": target},
        )

    def _reading(self, change: PriorityChange) -> str:
        return f"DescribeServiceJob {change.record.native_id}"

    def _writing(self, change: PriorityChange) -> str:
        return f"UpdateServiceJob {change.record.native_id}"
