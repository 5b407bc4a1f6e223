"""The DynamoDB item layout of the job registry (docs/registry.md): attribute values, records ⇄ items. The keys
are :mod:`osprey_control.registry.keys`' (re-exported here for the modules that read both).

Pure Python: attribute values are built here rather than with boto3's ``TypeSerializer`` so that this module
(and whoever imports it) stays off boto3's import path, and so that floats need no ``Decimal`` round trip.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from osprey_control.contract import OspreyBlock
from osprey_control.registry.allocation import AllocationMark, Allocations
from osprey_control.registry.apply_state import read_in_place
from osprey_control.registry.keys import (
    ACTIVE_INDEX,
    APPLY_PENDING_ATTRIBUTE,
    APPLY_PENDING_INDEX,
    DECISION_PREFIX,
    META,
    item_pk,
    job_pk,
)
from osprey_control.registry.model import (
    ApplyFailure,
    Backend,
    JobKey,
    JobRecord,
    JobStatus,
    NodeKind,
    NodeRef,
)

__all__ = [
    "ACTIVE_INDEX",
    "APPLY_PENDING_ATTRIBUTE",
    "APPLY_PENDING_INDEX",
    "format_time",
    "from_attribute",
    "item_to_record",
    "parse_time",
    "record_to_item",
    "shard_of",
]


def shard_of(key: JobKey, shards: int) -> int:
    """A stable shard 0..shards-1 from the key's hash, so a cycle can split the active jobs evenly."""
    digest = hashlib.sha256(job_pk(key).encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def format_time(when: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and ``Z``: sorts lexically in time order."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def to_attribute(value: Any) -> dict[str, Any]:
    """A DynamoDB attribute value for a JSON-like Python value."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"DynamoDB cannot store the non-finite number {value!r}; store a finite value")
        return {"N": repr(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, Mapping):
        return {"M": {str(key): to_attribute(item) for key, item in value.items()}}
    if isinstance(value, list | tuple):
        return {"L": [to_attribute(item) for item in value]}
    raise TypeError(f"cannot store {type(value).__name__} in the registry; convert it to JSON types first")


def from_attribute(attribute: Mapping[str, Any]) -> Any:
    """The Python value of a DynamoDB attribute value (numbers: int when integral in form, else float)."""
    kind, value = next(iter(attribute.items()))
    if kind == "S":
        return value
    if kind == "N":
        text = str(value)
        return int(text) if text.lstrip("-").isdigit() else float(text)
    if kind == "BOOL":
        return bool(value)
    if kind == "NULL":
        return None
    if kind == "M":
        return {key: from_attribute(item) for key, item in value.items()}
    if kind == "L":
        return [from_attribute(item) for item in value]
    raise ValueError(f"unexpected DynamoDB attribute type {kind!r} in the registry table")


def record_to_item(record: JobRecord, *, shards: int) -> dict[str, dict[str, Any]]:
    """The job item (``sk = META``). ``active_shard`` is present only while the job is active, and
    ``apply_pending_shard`` only while it is active and :meth:`JobRecord.apply_pending` (sparse indexes)."""
    values: dict[str, Any] = {
        "pk": job_pk(record.key),
        "sk": META,
        "backend": record.backend.value,
        "native_id": record.native_id,
        "name": record.name,
        "arn": record.arn,
        "policy": record.policy,
        "block": record.block.as_kwargs(),
        "status": record.status.value,
        "status_time": format_time(record.status_time),
        "submitted_at": format_time(record.submitted_at) if record.submitted_at else None,
        "observed_at": format_time(record.observed_at) if record.observed_at else None,
        "nodes": [node.model_dump(exclude_none=True, mode="json") for node in record.nodes],
        "job_queue": record.job_queue,
        "share_identifier": record.share_identifier,
        "cluster": record.cluster,
        "kind": record.kind,
        "tags": dict(record.tags) or None,
        "spot_risk": dict(record.spot_risk),
        "derived_priority": record.derived_priority,
        "applied_priority": record.applied_priority,
        "applied_at": format_time(record.applied_at) if record.applied_at else None,
        "apply_failure": _failure_values(record.apply_failure),
        "shadow_priority": record.shadow_priority,
        "shadow_at": format_time(record.shadow_at) if record.shadow_at else None,
        # A JSON string, not a map: decisions hold floats and nulls that a map would round through Decimal.
        "last_decision": (
            json.dumps(record.last_decision, sort_keys=True, allow_nan=False)
            if record.last_decision is not None
            else None
        ),
        "last_changed_at": format_time(record.last_changed_at) if record.last_changed_at else None,
        "declared_runtime_s": record.declared_runtime_s,
        "requested_gpus": record.requested_gpus,
        "native_priority": record.native_priority,
        "allocations": _allocation_values(record.allocations),
        "missing_since": format_time(record.missing_since) if record.missing_since else None,
        "version": record.version,
    }
    if record.active:
        values["active_shard"] = shard_of(record.key, shards)
        if record.apply_pending():
            values[APPLY_PENDING_ATTRIBUTE] = values["active_shard"]
    return {name: to_attribute(value) for name, value in values.items() if value is not None}


def history_item(
    current: JobRecord, job_item: Mapping[str, Any], *, previous: int | None, now: datetime, expires: int
) -> dict[str, dict[str, Any]]:
    """The ``DECISION#<time>#<version>`` item of a decision recorded in ``job_item`` (the written job item)."""
    version = job_item["version"]["N"]
    item: dict[str, dict[str, Any]] = {
        "pk": {"S": item_pk(DECISION_PREFIX, current.key)},
        "sk": {"S": f"{DECISION_PREFIX}{format_time(now)}#{int(version):010d}"},
        "recorded_at": {"S": format_time(now)},
        "policy": {"S": current.policy},
        "derived_priority": job_item["derived_priority"],
        "decision": job_item["last_decision"],
        "version": {"N": version},
        "ttl": {"N": str(expires)},  # table.TTL_ATTRIBUTE (that module imports this one)
    }
    if previous is not None:
        item["previous_priority"] = {"N": str(previous)}
    return item


def _mark_text(mark: AllocationMark) -> str:
    # One short string per mark ("<time> R8" running on 8 GPUs, "<time> R" GPUs unknown, "<time> S" not
    # running): the job item is rewritten on every event and decision, and its size is what each write costs.
    state = f"R{mark.gpus or ''}" if mark.running else "S"
    return f"{format_time(mark.at)} {state}"


def _mark(text: str) -> AllocationMark:
    when, _, state = text.partition(" ")
    running = state.startswith("R")
    return AllocationMark(at=parse_time(when), running=running, gpus=int(state[1:]) if state[1:] else None)


def _allocation_values(allocations: Allocations) -> dict[str, Any] | None:
    if allocations.empty:
        return None
    values: dict[str, Any] = {"marks": [_mark_text(mark) for mark in allocations.marks]}
    if allocations.folded_until is not None:
        values.update(
            folded_until=format_time(allocations.folded_until),
            folded_seconds=float(allocations.folded_seconds),
            folded_gpu_seconds=float(allocations.folded_gpu_seconds),
            folded_gpus_unknown=allocations.folded_gpus_unknown,
        )
    return values


def _allocations(values: Any) -> Allocations:
    # Items written before allocations were tracked have none: an empty history, not an error.
    if not isinstance(values, dict):
        return Allocations()
    until = values.get("folded_until")
    return Allocations(
        marks=tuple(_mark(text) for text in values.get("marks", [])),
        folded_until=parse_time(until) if isinstance(until, str) else None,
        folded_seconds=float(values.get("folded_seconds", 0.0)),
        folded_gpu_seconds=float(values.get("folded_gpu_seconds", 0.0)),
        folded_gpus_unknown=bool(values.get("folded_gpus_unknown", False)),
    )


def _failure_values(failure: ApplyFailure | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    return {**failure.model_dump(exclude={"at"}), "at": format_time(failure.at)}


def _failure(values: Any) -> ApplyFailure | None:
    if not isinstance(values, dict):
        return None
    return ApplyFailure.model_validate({**values, "at": parse_time(values["at"])})


def item_to_record(item: Mapping[str, Mapping[str, Any]]) -> JobRecord:
    values = {name: from_attribute(value) for name, value in item.items()}

    def time(name: str) -> datetime | None:
        text = values.get(name)
        return parse_time(text) if isinstance(text, str) else None

    decision = values.get("last_decision")
    applied = values.get("applied_priority")
    # Items written before the apply step recorded its own writes hold only ``applied_priority``, which was
    # then the derived priority (assumed applied): read it as both.
    derived = values.get("derived_priority", applied)
    record = JobRecord(
        backend=Backend(values["backend"]),
        native_id=values["native_id"],
        name=values["name"],
        arn=values.get("arn"),
        block=OspreyBlock.model_validate(values["block"]),
        status=JobStatus(values["status"]),
        status_time=parse_time(values["status_time"]),
        submitted_at=time("submitted_at"),
        observed_at=time("observed_at"),
        nodes=tuple(
            NodeRef(
                node_id=node["node_id"],
                kind=NodeKind(node["kind"]),
                instance_id=node.get("instance_id"),
                gpus=node.get("gpus"),
                instance_type=node.get("instance_type"),
                node_index=node.get("node_index"),
            )
            for node in values.get("nodes", [])
        ),
        job_queue=values.get("job_queue"),
        share_identifier=values.get("share_identifier"),
        cluster=values.get("cluster"),
        kind=values.get("kind"),
        tags={str(key): str(value) for key, value in (values.get("tags") or {}).items()},
        spot_risk={key: float(risk) for key, risk in values.get("spot_risk", {}).items()},
        derived_priority=derived,
        applied_priority=applied,
        applied_at=time("applied_at"),
        apply_failure=_failure(values.get("apply_failure")),
        shadow_priority=values.get("shadow_priority"),
        shadow_at=time("shadow_at"),
        last_decision=json.loads(decision) if isinstance(decision, str) else None,
        last_changed_at=time("last_changed_at"),
        declared_runtime_s=values.get("declared_runtime_s"),
        requested_gpus=values.get("requested_gpus"),
        native_priority=values.get("native_priority"),
        allocations=_allocations(values.get("allocations")),
        missing_since=time("missing_since"),
        version=int(values.get("version", 0)),
    )
    return read_in_place(record)  # a value found in place, recorded as a failure before issue 28: applied
