"""A cycle lease in the registry table: one conditional PutItem to take it, one conditional DeleteItem to give
it back.

Two cycles must never overlap (a slow cycle and the next scheduled one would both apply priorities, and the
damping would count one step twice). The scheduler cannot guarantee that, so each execution takes the lease
first and skips the cycle if another holds it. The lease expires on its own after ``ttl_seconds`` (the state
machine's timeout), so an execution that dies without releasing it blocks at most one timeout's worth of
cycles. The owner is the execution name: a retried acquire by the same execution succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from osprey_control.aws import client_for

__all__ = ["LEASE_PK", "CycleLease", "LeaseState"]

LEASE_PK = "LEASE#cycle"
_LEASE_SK = "LEASE"
# DynamoDB deletes expired items lazily (hours to days); ``expires_at`` is what the condition checks, the TTL
# attribute only tidies up leases of executions that never released.
_TTL_SLACK_SECONDS = 86_400


@dataclass(frozen=True)
class LeaseState:
    acquired: bool
    owner: str
    held_by: str | None
    expires_at: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "acquired": self.acquired,
            "owner": self.owner,
            "heldBy": self.held_by,
            "expiresAt": self.expires_at,
        }


def _now_epoch(now: datetime | None) -> int:
    return int((now or datetime.now(UTC)).timestamp())


class CycleLease:
    """The cycle lease of one registry table. ``client=None`` creates a DynamoDB client on first use."""

    def __init__(self, table_name: str, client: Any = None) -> None:
        self.table_name = table_name
        self._client = client

    @property
    def client(self) -> Any:
        self._client = client_for("dynamodb", self._client)
        return self._client

    def _key(self) -> dict[str, dict[str, str]]:
        return {"pk": {"S": LEASE_PK}, "sk": {"S": _LEASE_SK}}

    def acquire(self, owner: str, ttl_seconds: int, now: datetime | None = None) -> LeaseState:
        """Take the lease for ``owner`` unless another owner holds an unexpired one."""
        if not owner:
            raise ValueError("owner must be a non-empty string (the execution name)")
        if ttl_seconds < 1:
            raise ValueError(f"ttl_seconds must be at least 1, got {ttl_seconds}")
        current = _now_epoch(now)
        expires_at = current + ttl_seconds
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item={
                    **self._key(),
                    "owner": {"S": owner},
                    "expires_at": {"N": str(expires_at)},
                    "ttl": {"N": str(expires_at + _TTL_SLACK_SECONDS)},
                },
                ConditionExpression="attribute_not_exists(pk) OR expires_at < :now OR #owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":now": {"N": str(current)}, ":owner": {"S": owner}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as error:
            held = error.response.get("Item") or {}
            held_by = held.get("owner", {}).get("S")
            held_until = held.get("expires_at", {}).get("N")
            return LeaseState(False, owner, held_by, int(held_until) if held_until else None)
        return LeaseState(True, owner, owner, expires_at)

    def release(self, owner: str) -> bool:
        """Give the lease back if ``owner`` still holds it; False if it expired and someone else took it."""
        try:
            self.client.delete_item(
                TableName=self.table_name,
                Key=self._key(),
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True
