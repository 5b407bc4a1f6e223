"""The applier for SageMaker training jobs submitted through an AWS Batch SAGEMAKER_TRAINING job queue
(``sagemaker-queued``, docs/design.md §6): such a job is a Batch *service job*, and its priority is
``UpdateServiceJob`` ``schedulingPriority``, Osprey's 0..100 mapped onto 0..9999 by
:func:`osprey_control.contract.batch_scheduling_priority`. ``record.native_id`` is the service job id.

It reads the live service job first (DescribeServiceJob): that is where ``osprey:enabled`` is checked, and a value
already in place is not written again.
"""

from __future__ import annotations

import logging

from osprey_control.backends.actuation import (
    NOT_ENABLED,
    ApplyReport,
    ApplyResult,
    ClientApplier,
    Outcome,
    PriorityChange,
    failure,
    is_enabled,
)
from osprey_control.contract import batch_scheduling_priority
from osprey_control.registry import Backend

__all__ = ["ServiceJobApplier"]

logger = logging.getLogger(__name__)

_TERMINAL_SERVICE_JOB = frozenset({"SUCCEEDED", "FAILED"})


class ServiceJobApplier(ClientApplier):
    """``UpdateServiceJob`` for SageMaker training jobs queued through AWS Batch."""

    backends = frozenset({Backend.SAGEMAKER_QUEUED})
    service = "batch"

    def _apply_one(self, change: PriorityChange, report: ApplyReport) -> ApplyResult:
        key, priority = change.record.key, change.priority
        target = batch_scheduling_priority(priority)
        try:
            job = self.client.describe_service_job(jobId=change.record.native_id)
        except Exception as error:  # one job's failure must not stop the others
            return failure(change, error, f"DescribeServiceJob {change.record.native_id}")
        if not is_enabled(job.get("tags")):
            return ApplyResult(key, Outcome.SKIPPED, priority, NOT_ENABLED)
        if job.get("status") in _TERMINAL_SERVICE_JOB:
            return ApplyResult(key, Outcome.SKIPPED, priority, f"service job is {job['status']}")
        if job.get("schedulingPriority") == target:
            return ApplyResult(key, Outcome.APPLIED, priority, "already set", native_value=str(target))
        try:
            self.client.update_service_job(jobId=change.record.native_id, schedulingPriority=target)
        except Exception as error:  # one job's failure must not stop the others
            return failure(change, error, f"UpdateServiceJob {change.record.native_id}")
        finally:
            report.writes += 1
        logger.info(
            "service job priority updated",
            extra={"job": str(key), "priority": priority, "scheduling_priority": target},
        )
        return ApplyResult(key, Outcome.APPLIED, priority, "written", native_value=str(target))
