"""What Osprey accepts from one job's events and descriptions at most, checked before anything is built, and
the errors of an event it cannot use: :class:`MalformedEventError` and :class:`OverLimitError`.

Ingest and the backends' event parsers (``osprey_control.backends.<name>.events``) share these, so they live
below both. The bounds keep one job's registry item far below DynamoDB's 400 KB item limit whatever the event
says, and keep the work per event small: counts are checked before hosts are expanded, so a short message
cannot make ingest build millions of hosts. An event beyond a bound is dropped (:class:`OverLimitError`,
reason ``over-limit``); a value of the wrong type is ``malformed``. The table is repeated in docs/registry.md;
the bounds of the message itself (its size, its time) are ingest's (``osprey_control.ingest.limits``).

=====================  ==========  ===============================================================
bound                  value       why this value
=====================  ==========  ===============================================================
hosts per job          1,000       AWS Batch's default maximum nodes of a multi-node job; SageMaker
                                   ``InstanceCount`` summed over the instance groups
instance groups        16          SageMaker heterogeneous clusters use a handful
tags per job           50          AWS's limit of user tags per resource (``aws:`` keys and the
                                   ``resourceArn`` entry of Batch events do not count) ...
reserved tags          50          ... and at most 50 of those (CloudFormation, Batch and SageMaker
                                   add a handful; without a bound they were unlimited)
tag key / value        128 / 256   AWS's tag key and value lengths (characters)
job name               63 / 128    SageMaker training job / AWS Batch job and service job names
                                   (``MAX_NAME`` of ``sagemaker.events`` / ``aws_batch``)
job id                 128         a Batch job id is a UUID, ``#<node>`` for a multi-node job's node
ARN                    2,048       the longest ARN AWS issues
instance type          40          the longest EC2 / SageMaker instance type is about 20
other text             256         share identifiers, instance ids, statuses
=====================  ==========  ===============================================================

At these bounds a job item holds at most about 1,000 x 160 bytes of hosts (a 63-character job name in each
host's id, a 40-character instance type) plus 100 x 384 bytes of tags and a few KB of names and ARNs: about
185 KB, under half of DynamoDB's limit (measured in tests/control/ingest/test_limits.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from osprey_control.errors import PermanentError

__all__ = ["MALFORMED", "MAX_TEXT", "OVER_LIMIT", "MalformedEventError", "OverLimitError", "check_tags"]

MAX_HOSTS = 1_000
MAX_INSTANCE_GROUPS = 16
MAX_TAGS = 50
MAX_RESERVED_TAGS = 50
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
MAX_JOB_ID = 128
MAX_ARN = 2_048
MAX_TEXT = 256
MAX_INSTANCE_TYPE = 40

# The reasons of the two errors (ingest's DropReason values, which count dropped events by them).
MALFORMED = "malformed"
OVER_LIMIT = "over-limit"

# Not user tags: AWS-reserved keys, and the resource's own ARN that Batch adds to the tags of its events.
_UNCOUNTED_PREFIX = "aws:"
_UNCOUNTED_KEYS = frozenset({"resourceArn"})


class MalformedEventError(PermanentError):
    """The event cannot be understood; it is dropped (redelivering it would not help)."""

    hint = (
        "if it came from AWS, check the EventBridge rule delivers the unmodified event (no input transformer)"
    )

    def __init__(self, message: str, *, event_id: str | None = None, reason: str = MALFORMED) -> None:
        self.event_id = event_id
        where = f"event {event_id}: " if event_id else ""
        # str(): ingest passes its DropReason members, whose str is their value.
        super().__init__(f"{where}{message}. The event is dropped; {self.hint}.", reason=str(reason))


class OverLimitError(MalformedEventError):
    """The event describes more than Osprey stores for one job (docs/registry.md, Limits)."""

    hint = "Osprey's limits per job and why are in docs/registry.md (Limits)"

    def __init__(self, message: str, *, event_id: str | None = None) -> None:
        super().__init__(message, event_id=event_id, reason=OVER_LIMIT)


def check_text(value: str, field: str, limit: int, event_id: str | None) -> str:
    if len(value) > limit:
        raise OverLimitError(
            f"{field} has {len(value)} characters; Osprey stores at most {limit}", event_id=event_id
        )
    return value


def check_host_count(count: int, event_id: str | None = None) -> int:
    if count > MAX_HOSTS:
        raise OverLimitError(
            f"the job has {count} hosts; Osprey tracks at most {MAX_HOSTS} per job", event_id=event_id
        )
    return count


def check_tags(tags: Mapping[str, str], event_id: str | None = None) -> Mapping[str, str]:
    """``tags`` if within AWS's limits (count, key and value lengths), else :class:`OverLimitError`."""
    counted = [key for key in tags if not key.startswith(_UNCOUNTED_PREFIX) and key not in _UNCOUNTED_KEYS]
    if len(counted) > MAX_TAGS:
        raise OverLimitError(f"the job has {len(counted)} tags; AWS allows {MAX_TAGS}", event_id=event_id)
    reserved = len(tags) - len(counted)
    if reserved > MAX_RESERVED_TAGS:
        raise OverLimitError(
            f"the job has {reserved} aws: tags; Osprey stores at most {MAX_RESERVED_TAGS}", event_id=event_id
        )
    for key, value in tags.items():
        check_text(key, "a tag key", MAX_TAG_KEY, event_id)
        limit = MAX_ARN if key in _UNCOUNTED_KEYS else MAX_TAG_VALUE
        check_text(value, f"tag {key!r}", limit, event_id)
    return tags


def _tag_pair(entry: Any, where: str, event_id: str | None) -> tuple[str, str]:
    key = entry.get("Key", entry.get("key")) if isinstance(entry, Mapping) else None
    value = entry.get("Value", entry.get("value", "")) if isinstance(entry, Mapping) else None
    if not isinstance(key, str) or not isinstance(value, str):
        raise MalformedEventError(
            f"{where} must be a map of strings or a list of {{Key, Value}} strings, got entry {entry!r:.100}",
            event_id=event_id,
        )
    return key, value


def event_tags(value: Any, where: str, event_id: str | None) -> dict[str, str] | None:
    """Tags as an event or an AWS response carries them: a map, or SageMaker's ``[{"Key", "Value"}]`` list.
    None when absent; anything else (a list of strings, nested objects, numbers) is malformed."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise MalformedEventError(f"{where} must map strings to strings", event_id=event_id)
        tags = dict(value)
    elif isinstance(value, list):
        if len(value) > 4 * MAX_TAGS:  # before looking at each entry
            raise OverLimitError(f"{where} has {len(value)} entries", event_id=event_id)
        tags = dict(_tag_pair(entry, where, event_id) for entry in value)
    else:
        raise MalformedEventError(
            f"{where} must be a map or a list of {{Key, Value}}, got {type(value).__name__}",
            event_id=event_id,
        )
    check_tags(tags, event_id)
    return tags
