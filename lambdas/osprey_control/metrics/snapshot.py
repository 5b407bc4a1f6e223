"""A :class:`CollectionResult` as bytes, so the cycle's one collection can be handed to every shard's derive.

The cycle reads CloudWatch once for all shards (``ceil(series / 500)`` GetMetricData calls, not that many per
shard) and stores each shard's part in the registry (:class:`osprey_control.registry.collections.CollectionStore`);
the shard's derive step reads it back. The encoding is compressed JSON: a shard's metrics compress about ten to
one, which keeps a 10,000-job fleet's shards far under DynamoDB's 400 KB item size. Pure Python.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from osprey_control.derivation import JobMetrics, NodeMetrics
from osprey_control.metrics.collector import CollectionProblem, CollectionResult
from osprey_control.registry import JobKey, job_pk, key_from_pk

__all__ = ["SnapshotError", "decode", "encode", "split_by"]

_VERSION = 1


class SnapshotError(ValueError):
    """Bytes that are not a collection snapshot of this version: the reader collects for itself instead."""


def _job(metrics: JobMetrics) -> dict[str, Any]:
    return {
        "id": metrics.job_id,
        "backend": metrics.backend,
        "name": metrics.name,
        "job": dict(metrics.job_values),
        "nodes": [[node.node_id, dict(node.values)] for node in metrics.nodes],
        "notes": dict(metrics.notes),
        **({} if metrics.pinned_priority is None else {"pin": metrics.pinned_priority}),
        **({} if metrics.priority_floor is None else {"floor": metrics.priority_floor}),
    }


def encode(result: CollectionResult) -> bytes:
    """``result`` as compressed JSON. Floats are finite (the collector drops NaN and infinities)."""
    document = {
        "v": _VERSION,
        "series": result.series,
        "calls": result.calls,
        "reused": result.reused,
        "metrics": {job_pk(key): _job(metrics) for key, metrics in result.metrics.items()},
        "problems": {
            job_pk(key): [[p.kind, p.message, p.transient] for p in problems]
            for key, problems in result.problems.items()
        },
    }
    return zlib.compress(json.dumps(document, separators=(",", ":"), allow_nan=False).encode(), 6)


def decode(data: bytes) -> CollectionResult:
    """The :class:`CollectionResult` that :func:`encode` wrote; :class:`SnapshotError` for anything else."""
    try:
        document = json.loads(zlib.decompress(data))
        if not isinstance(document, Mapping) or document.get("v") != _VERSION:
            raise SnapshotError(f"not a version {_VERSION} collection snapshot")
        metrics: dict[JobKey, JobMetrics] = {}
        for pk, job in document["metrics"].items():
            metrics[key_from_pk(pk)] = JobMetrics(
                job_id=str(job["id"]),
                nodes=tuple(NodeMetrics(str(node_id), dict(values)) for node_id, values in job["nodes"]),
                job_values=dict(job["job"]),
                backend=str(job["backend"]),
                name=str(job["name"]),
                notes={str(k): str(v) for k, v in job.get("notes", {}).items()},
                pinned_priority=None if job.get("pin") is None else int(job["pin"]),
                priority_floor=None if job.get("floor") is None else int(job["floor"]),
            )
        problems: dict[JobKey, list[CollectionProblem]] = {}
        for pk, entries in document["problems"].items():
            key = key_from_pk(pk)
            problems[key] = [CollectionProblem(key, str(k), str(m), bool(t)) for k, m, t in entries]
        return CollectionResult(
            metrics,
            problems,
            series=int(document["series"]),
            calls=int(document["calls"]),
            reused=int(document["reused"]),
        )
    except SnapshotError:
        raise
    except (zlib.error, ValueError, KeyError, TypeError) as error:
        raise SnapshotError(f"unreadable collection snapshot: {error}") from error


def split_by(
    result: CollectionResult, part_of: Mapping[JobKey, int], parts: Iterable[int]
) -> dict[int, CollectionResult]:
    """``result`` cut into one result per part (a shard), each job's metrics and problems in its part.
    ``series`` and ``calls`` stay with the whole (they were one collection); each part has 0."""
    split = {part: CollectionResult({}) for part in parts}
    for key, metrics in result.metrics.items():
        if key in part_of and part_of[key] in split:
            split[part_of[key]].metrics[key] = metrics
    for key, problems in result.problems.items():
        if key in part_of and part_of[key] in split:
            split[part_of[key]].problems[key] = list(problems)
    return split
