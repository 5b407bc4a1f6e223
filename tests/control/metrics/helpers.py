"""Registry records for collector tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from osprey_control.contract import parse_block
from osprey_control.registry.model import Backend, JobRecord, JobStatus, NodeKind, NodeRef

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
BLOCK = parse_block({"priority_derivation_profile": "training-policy"})


def record(backend: Backend, native_id: str, nodes: list[NodeRef], **fields: Any) -> JobRecord:
    return JobRecord(
        backend=backend,
        native_id=native_id,
        name=fields.pop("name", native_id),
        block=fields.pop("block", BLOCK),
        status=fields.pop("status", JobStatus.RUNNING),
        status_time=NOW,
        nodes=tuple(nodes),
        **fields,
    )


def instance(instance_id: str) -> NodeRef:
    return NodeRef(node_id=instance_id, kind=NodeKind.INSTANCE, instance_id=instance_id)


def host(name: str, gpus: int | None = None) -> NodeRef:
    return NodeRef(node_id=name, kind=NodeKind.HOST, gpus=gpus)


def pod(name: str) -> NodeRef:
    return NodeRef(node_id=name, kind=NodeKind.POD)
