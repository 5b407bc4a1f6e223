"""The cycle's metric collection, one registry item per shard: written by the collect step, read by each
shard's derive step in the same execution.

Item: ``pk = COLLECTION#<shard>``, ``sk = META``, ``token`` (the lease token of the execution that wrote it),
``body`` (:mod:`osprey_control.metrics.snapshot` bytes) and a ``ttl`` an hour on (DynamoDB removes items the
control plane stopped writing). A reader asks for its own token: an item from another execution is not its
cycle's collection, so no fencing is needed on the write, and a stale writer cannot mislead a reader.

A body over :data:`MAX_BODY_BYTES` is not stored (DynamoDB items hold 400 KB): that shard's derive then reads
CloudWatch itself, which costs calls, not correctness.
"""

from __future__ import annotations

import time

from osprey_control.registry.keys import collection_key
from osprey_control.registry.table import TTL_ATTRIBUTE, RegistryTable

__all__ = ["CollectionStore"]

MAX_BODY_BYTES = 350_000
_TTL_SECONDS = 3600


class CollectionStore(RegistryTable):
    """Per-shard collection bodies under a lease token. ``client``: a DynamoDB client (created when None)."""

    def put(self, shard: int, token: int, body: bytes, *, now: float | None = None) -> bool:
        """Store ``body`` for ``shard`` under ``token``; False (nothing written) when it is too large."""
        if len(body) > MAX_BODY_BYTES:
            return False
        expires = int((time.time() if now is None else now) + _TTL_SECONDS)
        self.client.put_item(
            TableName=self.table_name,
            Item={
                **collection_key(shard),
                "token": {"N": str(token)},
                "body": {"B": body},
                TTL_ATTRIBUTE: {"N": str(expires)},
            },
        )
        return True

    def get(self, shard: int, token: int) -> bytes | None:
        """The body stored for ``shard`` by the execution holding ``token``, or None (none, or another's)."""
        item = self.client.get_item(
            TableName=self.table_name, Key=collection_key(shard), ConsistentRead=True
        ).get("Item")
        if not item or item.get("token", {}).get("N") != str(token):
            return None
        body = item.get("body", {}).get("B")
        return bytes(body) if body is not None else None
