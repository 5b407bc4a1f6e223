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
    LiveJob,
    PriorityChange,
    ReadThenWriteApplier,
)
from osprey_control.contract import tags_as_dict
from osprey_control.registry import Backend

__all__ = ["TrainingJobTagApplier"]

logger = logging.getLogger(__name__)


class TrainingJobTagApplier(ReadThenWriteApplier):
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

    def _read(self, change: PriorityChange) -> LiveJob:
        arn = change.record.arn
        if arn is None:
            arn = self.client.describe_training_job(TrainingJobName=change.record.native_id)["TrainingJobArn"]
        # The job written must be the record's: an ARN naming another training job (opted in or not) is never
        # tagged for this one. SageMaker's ARNs carry the name lower-cased.
        named = str(arn).rpartition(":training-job/")[2]
        if named.casefold() != change.record.native_id.casefold():
            raise ValueError(
                f"the recorded ARN {arn} names training job {named!r}, not {change.record.native_id!r}; not written"
            )
        tags = self._tags(arn)
        return LiveJob(tags, tags.get(DERIVED_PRIORITY_TAG), str(change.priority), handle=arn)

    def _write(self, change: PriorityChange, live: LiveJob) -> None:
        self.client.add_tags(
            ResourceArn=live.handle, Tags=[{"Key": DERIVED_PRIORITY_TAG, "Value": live.target}]
        )
        logger.info("training job tagged", extra={"job": str(change.record.key), "priority": change.priority})

    def _reading(self, change: PriorityChange) -> str:
        return f"reading the tags of training job {change.record.native_id}"

    def _writing(self, change: PriorityChange) -> str:
        return f"AddTags on training job {change.record.native_id}"
