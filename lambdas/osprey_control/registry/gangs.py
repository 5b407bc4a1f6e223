"""Gang watch state items in the registry table: ``pk = GANG#<backend>#<id>``, ``sk = GANG``.

A separate item from the job's ``META`` so the watch (every few seconds) and the cycle (every minute) never
contend for one item's version. Writes are conditional on the ``version`` read, so two watch executions for one
job (which the execution name already prevents) could not both advance it. The values are plain attributes; what
they mean is :mod:`osprey_control.gang.store`'s business.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from osprey_control.errors import condition_failed
from osprey_control.registry.batch import batch_get
from osprey_control.registry.items import format_time, from_attribute, to_attribute
from osprey_control.registry.keys import GANG_PREFIX, GANG_SK, item_pk, key_from_pk
from osprey_control.registry.model import JobKey
from osprey_control.registry.table import RegistryTable

__all__ = ["GangItems", "StaleGangStateError"]

_BOOKKEEPING = ("pk", "sk", "version", "updated_at")


class StaleGangStateError(RuntimeError):
    """Another writer advanced the gang state since it was read (retry the step)."""


def _values(item: dict[str, Any]) -> dict[str, Any]:
    return {name: from_attribute(attr) for name, attr in item.items() if name not in _BOOKKEEPING}


def _key(key: JobKey) -> dict[str, dict[str, str]]:
    return {"pk": {"S": item_pk(GANG_PREFIX, key)}, "sk": {"S": GANG_SK}}


class GangItems(RegistryTable):
    """Read and write the gang state items of one registry table. ``client=None`` creates a DynamoDB client on
    first use."""

    def load(self, key: JobKey) -> tuple[dict[str, Any] | None, int]:
        """The job's gang values and their version (0 when there are none yet); a consistent read."""
        item = self.client.get_item(TableName=self.table_name, Key=_key(key), ConsistentRead=True).get("Item")
        if not item:
            return None, 0
        return _values(item), int(item["version"]["N"])

    def load_many(self, keys: Iterable[JobKey]) -> dict[JobKey, dict[str, Any]]:
        """The values of each of ``keys`` that has some, in ``ceil(n / 100)`` BatchGetItem calls (a jobs list
        can be long; one GetItem per job would be n round trips). RuntimeError when DynamoDB keeps some unread."""
        read = batch_get(self.client, self.table_name, [_key(key) for key in keys])
        if read.unread:
            raise RuntimeError(f"DynamoDB left {len(read.unread)} gang state read(s) unprocessed; try again")
        return {key_from_pk(pk, GANG_PREFIX): _values(item) for (pk, _sk), item in read.items.items()}

    def save(self, key: JobKey, values: dict[str, Any], version: int, *, updated_at: datetime) -> int:
        """Write ``values`` if the stored version is still ``version``; returns the new version."""
        item = {name: to_attribute(value) for name, value in values.items()}
        item |= {
            **_key(key),
            "version": {"N": str(version + 1)},
            "updated_at": {"S": format_time(updated_at)},
        }
        kwargs: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        if version:
            kwargs = {
                "ConditionExpression": "version = :read",
                "ExpressionAttributeValues": {":read": {"N": str(version)}},
            }
        try:
            self.client.put_item(TableName=self.table_name, Item=item, **kwargs)
        except Exception as error:
            if condition_failed(error):
                raise StaleGangStateError(f"gang state of {key} changed since version {version}") from error
            raise
        return version + 1
