"""A cycle lease in the registry table: one conditional UpdateItem to take it, one to give it back.

Two cycles must never overlap (a slow cycle and the next scheduled one would both apply priorities, and the
damping would count one step twice). The scheduler cannot guarantee that, so each execution takes the lease
first and skips the cycle if another holds it. The lease expires on its own after ``ttl_seconds`` (the state
machine's timeout), so an execution that dies without releasing it blocks at most one timeout's worth of
cycles. The owner is the execution name: a retried acquire by the same execution succeeds.

Every successful acquire increments the item's fencing ``token`` (:mod:`osprey_control.registry.fence`),
which the execution passes to its derive and apply steps. The item is never deleted (a release only clears the
owner and the expiry), so the token never goes back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from osprey_control.registry.fence import TOKEN_ATTRIBUTE
from osprey_control.registry.keys import LEASE_KEY, LEASE_PK
from osprey_control.registry.table import RegistryTable

__all__ = ["LEASE_PK", "CycleLease", "LeaseState"]

# Leases written before fencing carried a TTL; the acquire removes it, since a deleted item would restart the
# token at 1.
_TTL_ATTRIBUTE = "ttl"


@dataclass(frozen=True)
class LeaseState:
    acquired: bool
    owner: str
    held_by: str | None
    expires_at: int | None
    token: int | None = None  # the fencing token this acquire got (None: not acquired)

    def to_dict(self) -> dict[str, Any]:
        return {
            "acquired": self.acquired,
            "owner": self.owner,
            "heldBy": self.held_by,
            "expiresAt": self.expires_at,
            "token": self.token,
        }


def _now_epoch(now: datetime | None) -> int:
    return int((now or datetime.now(UTC)).timestamp())


class CycleLease(RegistryTable):
    """The cycle lease of one registry table. ``client=None`` creates a DynamoDB client on first use."""

    def _key(self) -> dict[str, dict[str, str]]:
        return {name: dict(value) for name, value in LEASE_KEY.items()}

    def acquire(self, owner: str, ttl_seconds: int, now: datetime | None = None) -> LeaseState:
        """Take the lease for ``owner`` unless another owner holds an unexpired one."""
        if not owner:
            raise ValueError("owner must be a non-empty string (the execution name)")
        if ttl_seconds < 1:
            raise ValueError(f"ttl_seconds must be at least 1, got {ttl_seconds}")
        current = _now_epoch(now)
        expires_at = current + ttl_seconds
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(),
                UpdateExpression="SET #owner = :owner, expires_at = :expires ADD #token :one REMOVE #ttl",
                ConditionExpression="attribute_not_exists(pk) OR expires_at < :now OR #owner = :owner",
                ExpressionAttributeNames={
                    "#owner": "owner",
                    "#token": TOKEN_ATTRIBUTE,
                    "#ttl": _TTL_ATTRIBUTE,
                },
                ExpressionAttributeValues={
                    ":now": {"N": str(current)},
                    ":owner": {"S": owner},
                    ":expires": {"N": str(expires_at)},
                    ":one": {"N": "1"},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as error:
            held = error.response.get("Item") or {}
            held_by = held.get("owner", {}).get("S")
            held_until = held.get("expires_at", {}).get("N")
            return LeaseState(False, owner, held_by, int(held_until) if held_until else None)
        # A retried acquire by the same owner increments the token too: the execution uses the last answer.
        token = int(response["Attributes"][TOKEN_ATTRIBUTE]["N"])
        return LeaseState(True, owner, owner, expires_at, token)

    def release(self, owner: str) -> bool:
        """Give the lease back if ``owner`` still holds it; False if it expired and someone else took it."""
        try:
            # Not a DeleteItem: the item keeps the token, so the next acquire still increments it.
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(),
                UpdateExpression="SET expires_at = :free REMOVE #owner",
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}, ":free": {"N": "0"}},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True
