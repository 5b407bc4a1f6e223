"""The apply step's write intents: which backend writes an execution had in flight, so that a write that may
land after the lease changed hands is found and repaired.

A backend call cannot join a DynamoDB transaction, and a request the client gave up on can still be carried out
by the service afterwards. So before each applier call the apply step records an intent (``pk = WRITES#cycle``,
``sk = <token>#<call>``: the token it holds, the backends, the jobs, or none for "every job of these backends",
and ``until``, the epoch second after which none of the call's requests can still land) in a transaction that
checks its lease token, and deletes it, again fenced, once the call has returned. An execution that lost the
lease meanwhile cannot delete it: its intent stays, and every later apply step re-applies those jobs until
``until`` has passed, when the last repair removes it (docs/control-plane.md, Fencing).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from osprey_control.registry.fence import Fence, fenced_transaction
from osprey_control.registry.keys import WRITES_PK
from osprey_control.registry.model import Backend, JobKey
from osprey_control.registry.table import TTL_ATTRIBUTE, RegistryTable

__all__ = ["MAX_INTENT_KEYS", "WriteIntent", "WriteIntents"]

# An intent names its jobs only up to this many (a per-job applier's chunk: 25 or 50); a larger call (Batch:
# all of a cycle's jobs) is recorded as "every active job of these backends", which keeps the item small.
MAX_INTENT_KEYS = 50
# Intents nobody repaired (the control plane stopped) leave the table a day after their window.
_TTL_SECONDS = 86_400


@dataclass(frozen=True, slots=True)
class WriteIntent:
    """Backend writes issued under lease ``token``: to ``keys`` (None: any active job of ``backends``), all of
    which have landed or can no longer land once ``until`` (epoch seconds) has passed."""

    token: int
    call: int
    backends: tuple[Backend, ...]
    keys: tuple[JobKey, ...] | None
    until: int

    @property
    def sk(self) -> str:
        return f"{self.token:012d}#{self.call:06d}"

    def covers(self, key: JobKey, backend: Backend) -> bool:
        return backend in self.backends if self.keys is None else key in self.keys


def _item(intent: WriteIntent) -> dict[str, Any]:
    if not intent.backends:
        raise ValueError("a write intent names at least one backend (a DynamoDB string set cannot be empty)")
    item: dict[str, Any] = {
        "pk": {"S": WRITES_PK},
        "sk": {"S": intent.sk},
        "token": {"N": str(intent.token)},
        "backends": {"SS": sorted(backend.value for backend in intent.backends)},
        "until": {"N": str(intent.until)},
        TTL_ATTRIBUTE: {"N": str(intent.until + _TTL_SECONDS)},
    }
    if intent.keys is not None:
        item["keys"] = {"L": [{"S": str(key)} for key in intent.keys]}
    return item


def _intent(item: dict[str, Any]) -> WriteIntent:
    token, call = item["sk"]["S"].split("#")
    keys = item.get("keys")
    return WriteIntent(
        token=int(token),
        call=int(call),
        backends=tuple(Backend(value) for value in sorted(item["backends"]["SS"])),
        keys=None if keys is None else tuple(JobKey.parse(value["S"]) for value in keys["L"]),
        until=int(item["until"]["N"]),
    )


class WriteIntents(RegistryTable):
    """The intents of one registry table. ``client=None`` creates a DynamoDB client on first use."""

    def _pages(self) -> Iterator[dict[str, Any]]:
        return self.query_items(
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": WRITES_PK}},
            ConsistentRead=True,
        )

    def open(self) -> list[WriteIntent]:
        """Every intent not deleted yet, oldest token first (one consistent Query)."""
        return [_intent(item) for item in self._pages()]

    def record(self, intent: WriteIntent, fence: Fence) -> None:
        """Record ``intent`` before its writes, if ``fence`` still holds (else :class:`FenceLostError`, and the
        caller makes no write)."""
        put = {"Put": {"TableName": self.table_name, "Item": _item(intent)}}
        fenced_transaction(self.client, [put], fence)

    def resolve(self, intent: WriteIntent, fence: Fence) -> None:
        """Delete ``intent``: its writes returned while ``fence`` held, or a repair after ``until`` rewrote its
        jobs. :class:`FenceLostError` (nothing deleted) when another execution holds the lease."""
        key = {"pk": {"S": WRITES_PK}, "sk": {"S": intent.sk}}
        fenced_transaction(self.client, [{"Delete": {"TableName": self.table_name, "Key": key}}], fence)
