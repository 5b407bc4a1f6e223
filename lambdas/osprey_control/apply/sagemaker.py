"""SageMaker appliers (docs/design.md §6).

- :class:`ServiceJobApplier` (``sagemaker-queued``): a training job submitted through an AWS Batch
  SAGEMAKER_TRAINING job queue is a Batch *service job*; its priority is ``UpdateServiceJob``
  ``schedulingPriority``, Osprey's 0..100 mapped onto 0..9999 by
  :func:`osprey_control.contract.batch_scheduling_priority`. ``record.native_id`` is the service job id.
- :class:`TrainingJobTagApplier` (``sagemaker``): a training job created directly has no priority SageMaker
  honours, so Osprey only records its decision as the tag ``osprey:derived-priority=<N>`` (AddTags).

Both read the live resource first (DescribeServiceJob / ListTags): that is where ``osprey:enabled`` is checked,
and a value already in place is not written again.
"""

from __future__ import annotations

import logging
from typing import Any

from osprey_control.apply.base import (
    DERIVED_PRIORITY_TAG,
    ApplyReport,
    ApplyResult,
    ClientApplier,
    Outcome,
    PriorityChange,
    failure,
    is_enabled,
)
from osprey_control.contract import batch_scheduling_priority, tags_as_dict
from osprey_control.registry.model import Backend

__all__ = ["ServiceJobApplier", "TrainingJobTagApplier"]

logger = logging.getLogger(__name__)

_TERMINAL_SERVICE_JOB = frozenset({"SUCCEEDED", "FAILED"})
_NOT_ENABLED = "not tagged osprey:enabled=true; Osprey never writes to jobs that did not opt in"


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
            return ApplyResult(key, Outcome.SKIPPED, priority, _NOT_ENABLED)
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


class TrainingJobTagApplier(ClientApplier):
    """``AddTags osprey:derived-priority=<N>`` on SageMaker training jobs created directly."""

    backends = frozenset({Backend.SAGEMAKER})
    service = "sagemaker"

    def _tags(self, arn: str) -> dict[str, str]:
        tags: dict[str, str] = {}
        request: dict[str, Any] = {"ResourceArn": arn}
        while True:
            page = self.client.list_tags(**request)
            tags.update(tags_as_dict(page.get("Tags")))
            if not page.get("NextToken"):
                return tags
            request["NextToken"] = page["NextToken"]

    def _apply_one(self, change: PriorityChange, report: ApplyReport) -> ApplyResult:
        key, priority = change.record.key, change.priority
        arn = change.record.arn
        try:
            if arn is None:
                arn = self.client.describe_training_job(TrainingJobName=change.record.native_id)[
                    "TrainingJobArn"
                ]
            tags = self._tags(arn)
        except Exception as error:  # one job's failure must not stop the others
            return failure(change, error, f"reading the tags of training job {change.record.native_id}")
        if not is_enabled(tags):
            return ApplyResult(key, Outcome.SKIPPED, priority, _NOT_ENABLED)
        if tags.get(DERIVED_PRIORITY_TAG) == str(priority):
            return ApplyResult(key, Outcome.APPLIED, priority, "already set", native_value=str(priority))
        try:
            self.client.add_tags(
                ResourceArn=arn, Tags=[{"Key": DERIVED_PRIORITY_TAG, "Value": str(priority)}]
            )
        except Exception as error:  # one job's failure must not stop the others
            return failure(change, error, f"AddTags on training job {change.record.native_id}")
        finally:
            report.writes += 1
        logger.info("training job tagged", extra={"job": str(key), "priority": priority})
        return ApplyResult(key, Outcome.APPLIED, priority, "written", native_value=str(priority))
