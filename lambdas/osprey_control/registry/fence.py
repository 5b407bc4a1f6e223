"""Fencing: the cycle lease's token, which makes an execution that lost the lease write nothing.

The lease expires after the state machine's timeout, but a Lambda of the timed-out execution can still be
running when the next execution takes the lease. Every acquire increments the lease item's ``token``; each
execution passes the token it got to its derive and apply steps, whose registry writes carry a
``ConditionCheck`` on the lease item (``token = :mine``) in the same transaction, so once another execution
has acquired, the old one's writes fail as a whole. Backend writes cannot join a DynamoDB transaction: they are
preceded by :meth:`Fence.holds`, a consistent read (docs/control-plane.md, Fencing, for the window that leaves).
"""

from __future__ import annotations

from typing import Any

from osprey_control.errors import aws_error_code
from osprey_control.registry.keys import LEASE_KEY
from osprey_control.registry.table import RegistryTable

__all__ = ["Fence", "FenceLostError"]

TOKEN_ATTRIBUTE = "token"


class FenceLostError(Exception):
    """Another execution acquired the lease after this one: nothing of this write happened, and no further
    write of this execution will. Permanent: retrying cannot succeed, and it says nothing about the job."""

    def __init__(self, token: int) -> None:
        self.token = token
        super().__init__(
            f"the cycle lease is no longer at token {token}: a later execution holds it, so this one stops writing"
        )


class Fence(RegistryTable):
    """This execution's lease token on ``table_name``. ``client`` (DynamoDB, created on first use if None)
    is used only by :meth:`holds`; :meth:`condition_check` goes into the caller's own transaction."""

    def __init__(self, table_name: str, token: int, client: Any = None) -> None:
        super().__init__(table_name, client)
        self.token = token

    def condition_check(self) -> dict[str, Any]:
        """A TransactWriteItems entry that cancels the transaction unless the lease is still at our token."""
        return {
            "ConditionCheck": {
                "TableName": self.table_name,
                "Key": LEASE_KEY,
                "ConditionExpression": "#token = :mine",
                "ExpressionAttributeNames": {"#token": TOKEN_ATTRIBUTE},
                "ExpressionAttributeValues": {":mine": {"N": str(self.token)}},
            }
        }

    def holds(self) -> bool:
        """The lease is still at our token (a consistent read: an eventually consistent one could miss a
        just-completed acquire)."""
        item = self.client.get_item(
            TableName=self.table_name,
            Key=LEASE_KEY,
            ConsistentRead=True,
            ProjectionExpression="#token",
            ExpressionAttributeNames={"#token": TOKEN_ATTRIBUTE},
        ).get("Item")
        return bool(item) and item.get(TOKEN_ATTRIBUTE, {}).get("N") == str(self.token)

    def ensure(self) -> None:
        """Raise :class:`FenceLostError` unless :meth:`holds`."""
        if not self.holds():
            raise FenceLostError(self.token)


def failed_checks(error: BaseException) -> list[bool] | None:
    """For a cancelled transaction, which of its items failed their condition (in request order); None for
    any other error."""
    if aws_error_code(error) != "TransactionCanceledException":
        return None
    reasons = getattr(error, "response", {}).get("CancellationReasons", [])
    return [reason.get("Code") == "ConditionalCheckFailed" for reason in reasons]


def fenced_transaction(client: Any, items: list[dict[str, Any]], fence: Fence) -> list[bool] | None:
    """TransactWriteItems of ``items`` plus ``fence``'s ConditionCheck (last). Raises :class:`FenceLostError` if
    the fence failed; returns the items' failed conditions if only they did, None if it was written."""
    try:
        client.transact_write_items(TransactItems=[*items, fence.condition_check()])
    except Exception as error:
        failed = failed_checks(error)
        if failed is None:
            raise
        if len(failed) > len(items) and failed[len(items)]:
            raise FenceLostError(fence.token) from None
        if any(failed):
            return failed[: len(items)]
        raise  # cancelled for another reason (a concurrent transaction on the same items): transient
    return None
