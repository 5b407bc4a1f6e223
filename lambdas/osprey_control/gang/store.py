"""Gang watch state in the registry table: item ``pk = JOB#<backend>#<id>``, ``sk = GANG``.

A separate item from the job's ``META`` so the watch (every few seconds) and the cycle (every minute) never
contend for one item's version. Writes are conditional on the ``version`` read, so two watch executions for
one job (which the execution name already prevents) could not both advance it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, fields
from datetime import datetime
from typing import Any

from osprey_control.aws import client_for
from osprey_control.gang.decision import GangPhase, GangState
from osprey_control.registry.batch import batch_get
from osprey_control.registry.items import format_time, from_attribute, parse_time, to_attribute
from osprey_control.registry.keys import GANG_SK, job_pk, key_from_pk
from osprey_control.registry.model import JobKey

__all__ = ["GANG_SK", "GangStore", "StaleGangStateError", "state_from_dict", "state_to_dict"]

_TIMES = frozenset({"watch_started_at", "attempt_started_at", "ready_at", "resume_at"})


def _state(item: dict[str, Any]) -> GangState:
    return state_from_dict(
        {name: from_attribute(attr) for name, attr in item.items() if name not in ("pk", "sk", "version")}
    )


class StaleGangStateError(RuntimeError):
    """Another writer advanced the gang state since it was read (retry the step)."""


def state_to_dict(state: GangState) -> dict[str, Any]:
    values = asdict(state)
    for name in _TIMES:
        if values[name] is not None:
            values[name] = format_time(values[name])
    values["phase"] = state.phase.value
    return values


def state_from_dict(values: dict[str, Any]) -> GangState:
    known = {f.name for f in fields(GangState)}
    kwargs = {name: value for name, value in values.items() if name in known}
    for name in _TIMES & kwargs.keys():
        if kwargs[name] is not None:
            kwargs[name] = parse_time(str(kwargs[name]))
    kwargs["phase"] = GangPhase(kwargs["phase"])
    return GangState(**kwargs)


class GangStore:
    """Read and write one job's gang state. ``client=None`` creates a DynamoDB client on first use."""

    def __init__(self, table_name: str, client: Any = None) -> None:
        self.table_name = table_name
        self._client = client

    @property
    def client(self) -> Any:
        self._client = client_for("dynamodb", self._client)
        return self._client

    def load(self, key: JobKey) -> tuple[GangState | None, int]:
        """The state and its version (0 when there is none yet)."""
        item = self.client.get_item(
            TableName=self.table_name,
            Key={"pk": {"S": job_pk(key)}, "sk": {"S": GANG_SK}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None, 0
        return _state(item), int(item["version"]["N"])

    def load_many(self, keys: Iterable[JobKey]) -> dict[JobKey, GangState]:
        """The state of each of ``keys`` that has one, in ``ceil(n / 100)`` BatchGetItem calls (a jobs list can
        be long; one GetItem per job would be n round trips). RuntimeError when DynamoDB keeps some unread."""
        read = batch_get(
            self.client, self.table_name, [{"pk": {"S": job_pk(key)}, "sk": {"S": GANG_SK}} for key in keys]
        )
        if read.unread:
            raise RuntimeError(f"DynamoDB left {len(read.unread)} gang state read(s) unprocessed; try again")
        return {key_from_pk(pk): _state(item) for (pk, _sk), item in read.items.items()}

    def save(self, key: JobKey, state: GangState, version: int, *, updated_at: datetime) -> int:
        """Write ``state`` if the stored version is still ``version``; returns the new version."""
        item = {name: to_attribute(value) for name, value in state_to_dict(state).items()}
        item |= {
            "pk": {"S": job_pk(key)},
            "sk": {"S": GANG_SK},
            "version": {"N": str(version + 1)},
            "updated_at": {"S": format_time(updated_at)},
        }
        condition = "attribute_not_exists(pk)" if version == 0 else "version = :read"
        kwargs: dict[str, Any] = {"ConditionExpression": condition}
        if version:
            kwargs["ExpressionAttributeValues"] = {":read": {"N": str(version)}}
        try:
            self.client.put_item(TableName=self.table_name, Item=item, **kwargs)
        except self.client.exceptions.ConditionalCheckFailedException as error:
            raise StaleGangStateError(f"gang state of {key} changed since version {version}") from error
        return version + 1
