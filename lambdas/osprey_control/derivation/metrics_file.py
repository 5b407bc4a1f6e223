"""The metrics file of ``osprey derive``: one job's metrics in raw units (docs/design.md §3, §4).

```json
{"job": {"id": "j1", "backend": "sagemaker", "queue_wait": 0, "attained_service": 12.5,
         "remaining_time": 7200, "requested_gpus": 64},
 "nodes": [{"node_id": "i-1", "gpu_utilization": [95, 91], "node_interconnect_latency": 120}]}
```
The job-level metrics (``queue_wait``, ``attained_service``, ``remaining_time``, ``requested_gpus``: every
``Metric`` whose ``job_level`` is true) sit in ``job``, each a single number; they are read only there, so a
job with no nodes yet (queued) can still be derived. Node-level metrics sit in ``nodes``: a value is a number
or a list of per-GPU numbers (averaged; an empty list is no data). Unknown keys, and a metric at the wrong
level, are ignored. A non-numeric or non-finite value is an error naming its path
(``nodes[0].gpu_utilization``, ``job.remaining_time``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from osprey_control.derivation.inputs import JobMetrics, NodeMetrics, mean_of_gpus
from osprey_control.policy import MAX_FILE_BYTES, Metric, UnsafeYamlError

__all__ = ["MetricsFileError", "parse_metrics_document", "read_metrics_file"]

_NODE_METRICS = tuple(metric.value for metric in Metric if not metric.job_level)
_JOB_METRICS = tuple(metric.value for metric in Metric if metric.job_level)


class MetricsFileError(ValueError):
    """A problem in a metrics file; ``path`` is the field path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MetricsFileError(path, f"must be a number, got {json.dumps(value)[:40]}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range
        number = math.inf
    if not math.isfinite(number):
        raise MetricsFileError(path, f"must be a finite number, got {number}")
    return number


def _node_value(value: Any, path: str) -> float | None:
    if isinstance(value, list):
        return mean_of_gpus([_number(item, f"{path}[{index}]") for index, item in enumerate(value)])
    return _number(value, path)


def _text(value: Any, path: str, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise MetricsFileError(path, "must be a string")
    return str(value)


def parse_metrics_document(data: Any) -> JobMetrics:
    """Validate an already-decoded metrics document."""
    if not isinstance(data, Mapping):
        raise MetricsFileError("(document)", "must be an object with 'job' and 'nodes'")
    job = data.get("job", {})
    if not isinstance(job, Mapping):
        raise MetricsFileError("job", "must be an object")
    nodes = data.get("nodes", [])
    if not isinstance(nodes, list):
        raise MetricsFileError("nodes", "must be a list of objects")

    job_values = {
        metric: _number(job[metric], f"job.{metric}")
        for metric in _JOB_METRICS
        if job.get(metric) is not None
    }
    parsed_nodes = []
    for index, node in enumerate(nodes):
        path = f"nodes[{index}]"
        if not isinstance(node, Mapping):
            raise MetricsFileError(path, "must be an object")
        values: dict[str, float] = {}
        for metric in _NODE_METRICS:
            if node.get(metric) is None:
                continue
            value = _node_value(node[metric], f"{path}.{metric}")
            if value is not None:
                values[metric] = value
        parsed_nodes.append(
            NodeMetrics(_text(node.get("node_id"), f"{path}.node_id", f"node-{index}"), values)
        )
    return JobMetrics(
        job_id=_text(job.get("id"), "job.id", "job"),
        nodes=tuple(parsed_nodes),
        job_values=job_values,
        backend=_text(job.get("backend"), "job.backend", "unknown"),
        name=_text(job.get("name"), "job.name", ""),
    )


def read_metrics_file(path: str | Path) -> JobMetrics:
    """Read a JSON (or, by suffix, YAML) metrics file. Raises :class:`MetricsFileError` or OSError."""
    path = Path(path)
    with path.open("rb") as handle:
        raw = handle.read(MAX_FILE_BYTES * 4 + 1)
    if len(raw) > MAX_FILE_BYTES * 4:
        raise MetricsFileError("(file)", f"file is larger than {MAX_FILE_BYTES * 4} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise MetricsFileError(
            "(file)", f"not UTF-8 text (byte {error.start}); save the file as UTF-8"
        ) from None
    if path.suffix in (".yaml", ".yml"):
        try:
            # Imported here: PyYAML is only needed for YAML text, never on the Lambda (JSON) path.
            from osprey_control.policy import read_documents  # noqa: PLC0415

            documents = read_documents(text)
        except UnsafeYamlError as problem:
            raise MetricsFileError(problem.location, problem.message) from None
        if len(documents) != 1:
            raise MetricsFileError("(file)", "must hold exactly one YAML document")
        return parse_metrics_document(documents[0][1])
    try:
        data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except MetricsFileError:
        raise
    except json.JSONDecodeError as error:
        raise MetricsFileError(
            f"line {error.lineno}, column {error.colno}", f"not valid JSON: {error.msg}"
        ) from None
    except RecursionError:
        raise MetricsFileError("(file)", "nesting is too deep for a metrics file") from None
    except ValueError as error:  # e.g. an integer literal longer than Python converts
        raise MetricsFileError("(file)", f"value out of range: {error}") from None
    return parse_metrics_document(data)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Like the policy reader: a repeated key is a mistake, not "the last one wins".
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise MetricsFileError("(file)", f"duplicate key '{key}'; each key may appear once per object")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    # NaN / Infinity are not JSON; accepting them would hide a broken exporter.
    raise MetricsFileError("(file)", f"{name} is not a valid JSON number; metric values must be finite")
