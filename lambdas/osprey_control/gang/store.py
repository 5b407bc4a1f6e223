"""A job's gang watch state, to and from the registry's gang item (:mod:`osprey_control.registry.gangs`, which
owns the DynamoDB requests and the version check)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, fields
from datetime import datetime
from typing import Any

from osprey_control.gang.decision import GangPhase, GangState
from osprey_control.registry import GangItems, JobKey, StaleGangStateError, format_time, parse_time

__all__ = ["GangStore", "StaleGangStateError", "state_from_dict", "state_to_dict"]

_TIMES = frozenset({"watch_started_at", "attempt_started_at", "ready_at", "resume_at"})


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
    """Read and write one job's gang state (the items: :class:`osprey_control.registry.gangs.GangItems`).
    ``client=None`` creates a DynamoDB client on first use."""

    def __init__(self, table_name: str, client: Any = None) -> None:
        self.table_name = table_name
        self.items = GangItems(table_name, client)

    def load(self, key: JobKey) -> tuple[GangState | None, int]:
        """The state and its version (0 when there is none yet)."""
        values, version = self.items.load(key)
        return (None if values is None else state_from_dict(values)), version

    def load_many(self, keys: Iterable[JobKey]) -> dict[JobKey, GangState]:
        """The state of each of ``keys`` that has one (batched reads)."""
        return {key: state_from_dict(values) for key, values in self.items.load_many(keys).items()}

    def save(self, key: JobKey, state: GangState, version: int, *, updated_at: datetime) -> int:
        """Write ``state`` if the stored version is still ``version``; returns the new version."""
        return self.items.save(key, state_to_dict(state), version, updated_at=updated_at)
