"""BatchGetItem over any number of registry keys: chunks of 100 (the API's limit), unprocessed keys asked
again with backoff, and the keys still unread at the end handed back to the caller (who decides whether that
is an error or a job to try next cycle)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_KEYS_PER_BATCH_GET"]

MAX_KEYS_PER_BATCH_GET = 100
_ATTEMPTS = 5
_BACKOFF_S = 0.05


@dataclass
class BatchRead:
    """The items found, by ``(pk, sk)``, and the keys DynamoDB left unprocessed after every attempt."""

    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    unread: list[dict[str, Any]] = field(default_factory=list)


def batch_get(
    client: Any,
    table: str,
    keys: Sequence[dict[str, Any]],
    *,
    consistent: bool = False,
    attempts: int = _ATTEMPTS,
    sleep: Any = time.sleep,
) -> BatchRead:
    """Read ``keys`` (``{"pk": {"S": ..}, "sk": {"S": ..}}``) in ``ceil(n / 100)`` calls plus the retries that
    unprocessed keys need (DynamoDB returns them under throughput pressure; backing off is what it asks)."""
    read = BatchRead()
    unique = list({(key["pk"]["S"], key["sk"]["S"]): key for key in keys}.values())
    for offset in range(0, len(unique), MAX_KEYS_PER_BATCH_GET):
        pending = unique[offset : offset + MAX_KEYS_PER_BATCH_GET]
        for attempt in range(attempts):
            request: dict[str, Any] = {"Keys": pending}
            if consistent:
                request["ConsistentRead"] = True
            response = client.batch_get_item(RequestItems={table: request})
            for item in response.get("Responses", {}).get(table, []):
                read.items[(item["pk"]["S"], item["sk"]["S"])] = item
            pending = response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
            if not pending:
                break
            if attempt + 1 < attempts:
                sleep(_BACKOFF_S * 2**attempt)
        read.unread.extend(pending)
    return read
