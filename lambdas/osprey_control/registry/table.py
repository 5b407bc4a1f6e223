"""The registry table's definition: one helper for tests and ``osprey local``, mirrored by the CDK construct.

docs/registry.md lists the same attribute definitions, key schema and index for the CDK author; keep them in
step.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from osprey_control.aws import client_for
from osprey_control.registry.keys import ACTIVE_INDEX, APPLY_PENDING_ATTRIBUTE, APPLY_PENDING_INDEX

__all__ = ["TTL_ATTRIBUTE"]

TTL_ATTRIBUTE = "ttl"
ATTRIBUTE_DEFINITIONS: list[dict[str, str]] = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "S"},
    {"AttributeName": "active_shard", "AttributeType": "N"},
    {"AttributeName": APPLY_PENDING_ATTRIBUTE, "AttributeType": "N"},
]
KEY_SCHEMA: list[dict[str, str]] = [
    {"AttributeName": "pk", "KeyType": "HASH"},
    {"AttributeName": "sk", "KeyType": "RANGE"},
]
# Sparse: only job items of active jobs carry active_shard. ALL projection so a cycle reads each shard with
# one paginated Query and no per-job GetItem.
GLOBAL_SECONDARY_INDEXES: list[dict[str, Any]] = [
    {
        "IndexName": ACTIVE_INDEX,
        "KeySchema": [
            {"AttributeName": "active_shard", "KeyType": "HASH"},
            {"AttributeName": "pk", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "ALL"},
    },
    # Sparse too: only the active jobs whose derived priority is not on the backend yet. Keys only: the apply
    # step re-reads each job with a consistent GetItem anyway (the index lags the derive step's writes), and
    # the item is rewritten often while pending, so an ALL projection would replicate every write's full size.
    {
        "IndexName": APPLY_PENDING_INDEX,
        "KeySchema": [
            {"AttributeName": APPLY_PENDING_ATTRIBUTE, "KeyType": "HASH"},
            {"AttributeName": "pk", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    },
]


def create_table(client: Any = None, name: str = "osprey-jobs") -> str:
    """Create the registry table (on-demand, the ``active-jobs`` and ``apply-pending`` indexes, TTL on ``ttl``); returns its name.

    Waits until the table is ACTIVE. Raises the client's ``ResourceInUseException`` if it already exists.
    """
    dynamodb = client_for("dynamodb", client)
    dynamodb.create_table(
        TableName=name,
        AttributeDefinitions=ATTRIBUTE_DEFINITIONS,
        KeySchema=KEY_SCHEMA,
        GlobalSecondaryIndexes=GLOBAL_SECONDARY_INDEXES,
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    dynamodb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    )
    return name


class RegistryTable:
    """Base of the registry's adapters (jobs, lease, fence, gangs, plans, shares, collections): the table's name
    and a DynamoDB client, ``client=None`` creating one on first use (never at import)."""

    def __init__(self, table_name: str, client: Any = None) -> None:
        self.table_name = table_name
        self._client = client

    @property
    def client(self) -> Any:
        self._client = client_for("dynamodb", self._client)
        return self._client

    def query_items(self, **request: Any) -> Iterator[dict[str, Any]]:
        """The items of a Query on this table (``request`` without ``TableName``), page after page."""
        request = {"TableName": self.table_name, **request}
        while True:
            page = self.client.query(**request)
            yield from page.get("Items", ())
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
