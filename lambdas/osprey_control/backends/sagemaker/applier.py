"""The applier for SageMaker training jobs created directly (``sagemaker``, docs/design.md §6): such a job has
no priority SageMaker honours, so Osprey records its decision as the tag ``osprey:derived-priority=<N>``
(AddTags).

It reads the live tags first (ListTags): that is where ``osprey:enabled`` is checked, and a value already in
place is not written again.
"""

from __future__ import annotations

import logging
from typing import Any

from osprey_control.backends.actuation import (
    DERIVED_PRIORITY_TAG,
    NOT_ENABLED,
    ApplyReport,
    ApplyResult,
    ClientApplier,
    Outcome,
    PriorityChange,
    failure,
    is_enabled,
)
from osprey_control.contract import tags_as_dict
from osprey_control.registry import Backend

__all__ = ["TrainingJobTagApplier"]

logger = logging.getLogger(__name__)


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
            return ApplyResult(key, Outcome.SKIPPED, priority, NOT_ENABLED)
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
