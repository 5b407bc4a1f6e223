"""A job's history in the registry: its recorded decisions (``DECISION#<backend>#<id>`` /
``DECISION#<time>#<version>``, written by the derive step with the decision) and the apply step's outcomes
(``APPLY#<backend>#<id>`` / ``APPLY#<time>#<priority>``: the value that reached the
backend, or why it did not), and the status changes Osprey made itself (``STATUS#<backend>#<id>`` /
``STATUS#<time>``: a job closed because its cluster no longer lists it, with the reason). All expire with the
history retention (14 days by default). ``osprey history``
and ``osprey policy replay`` read them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from osprey_control.registry.fence import Fence, fenced_transaction
from osprey_control.registry.items import format_time, from_attribute
from osprey_control.registry.keys import APPLY_PREFIX, DECISION_PREFIX, STATUS_PREFIX, item_pk
from osprey_control.registry.model import JobKey
from osprey_control.registry.table import TTL_ATTRIBUTE, RegistryTable

__all__: list[str] = []

APPLIED = "applied"
APPLY_FAILED = "apply-failed"
# Shadow mode: the value the apply step would have written; nothing reached the backend.
SHADOW = "shadow"
_DETAIL_CHARS = 500  # an apply failure's reason can be long (an API error); the history keeps its start


class JobHistory(RegistryTable):
    """Read a job's decisions and apply outcomes; record an apply outcome. ``client=None`` creates a DynamoDB
    client on first use."""

    def _items(
        self, key: JobKey, prefix: str, since: datetime | None, limit: int | None, newest_first: bool
    ) -> Iterator[dict[str, Any]]:
        start = prefix + (format_time(since) if since is not None else "")
        request: dict[str, Any] = {
            # "~" sorts after every character a time or a number uses: the end of the prefix's range.
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :start AND :end",
            "ExpressionAttributeValues": {
                ":pk": {"S": item_pk(prefix, key)},
                ":start": {"S": start},
                ":end": {"S": prefix + "~"},
            },
            "ScanIndexForward": not newest_first,
        }
        if limit is not None:
            request["Limit"] = limit
        items = self.query_items(**request)
        for item in items if limit is None else itertools.islice(items, limit):
            yield {name: from_attribute(value) for name, value in item.items()}

    def decisions(
        self,
        key: JobKey,
        *,
        since: datetime | None = None,
        limit: int | None = None,
        newest_first: bool = True,
    ) -> list[dict[str, Any]]:
        """The job's recorded decisions (``recorded_at``, ``policy``, ``derived_priority``,
        ``previous_priority``, ``decision``: the explanation with the ``inputs`` it was derived from, parsed)."""
        found = list(self._items(key, DECISION_PREFIX, since, limit, newest_first))
        for item in found:
            if isinstance(item.get("decision"), str):  # stored as the job item's JSON text
                item["decision"] = json.loads(item["decision"])
        return found

    def apply_events(
        self,
        key: JobKey,
        *,
        since: datetime | None = None,
        limit: int | None = None,
        newest_first: bool = True,
    ) -> list[dict[str, Any]]:
        """The apply step's outcomes for the job (``recorded_at``, ``outcome``, ``priority``, ``detail``)."""
        return list(self._items(key, APPLY_PREFIX, since, limit, newest_first))

    def record_apply(
        self,
        key: JobKey,
        *,
        priority: int,
        outcome: str,
        detail: str,
        now: datetime,
        expires: int,
        fence: Fence | None = None,
    ) -> None:
        """Note an apply outcome (:data:`APPLIED`, with ``native_value`` or "already set" as detail, or
        :data:`APPLY_FAILED` with the reason). With a ``fence``, a transaction that checks the lease token
        (:class:`~osprey_control.registry.fence.FenceLostError`, nothing written, once another execution holds
        it)."""
        put = {
            "TableName": self.table_name,
            "Item": {
                "pk": {"S": item_pk(APPLY_PREFIX, key)},
                "sk": {"S": f"{APPLY_PREFIX}{format_time(now)}#{priority:03d}"},
                "recorded_at": {"S": format_time(now)},
                "outcome": {"S": outcome},
                "priority": {"N": str(priority)},
                "detail": {"S": detail[:_DETAIL_CHARS]},
                TTL_ATTRIBUTE: {"N": str(expires)},
            },
        }
        if fence is not None:
            fenced_transaction(self.client, [{"Put": put}], fence)
        else:
            self.client.put_item(**put)

    def status_events(self, key: JobKey, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The status changes Osprey made itself (``recorded_at``, ``status``, ``reason``), newest first."""
        return list(self._items(key, STATUS_PREFIX, None, limit, True))

    def record_status(self, key: JobKey, *, status: str, reason: str, now: datetime, expires: int) -> None:
        """Note a status Osprey set without the backend saying so (a job closed by reconciliation)."""
        self.client.put_item(
            TableName=self.table_name,
            Item={
                "pk": {"S": item_pk(STATUS_PREFIX, key)},
                "sk": {"S": f"{STATUS_PREFIX}{format_time(now)}"},
                "recorded_at": {"S": format_time(now)},
                "status": {"S": status},
                "reason": {"S": reason[:_DETAIL_CHARS]},
                TTL_ATTRIBUTE: {"N": str(expires)},
            },
        )
