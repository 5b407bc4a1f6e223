"""Which CloudWatch series describe a job: one :class:`SeriesSpec` per (node, source metric), docs/design.md §3.

Pure Python, no AWS import. :func:`build_series` turns a shard of :class:`JobRecord` into specs;
:func:`metric_data_query` turns one spec into a GetMetricData ``MetricStat`` query.

Sources, by node kind:

- ``instance`` (Batch, EKS nodes): CloudWatch agent ``nvidia_smi_*`` rolled up per instance (dimension
  ``InstanceId`` only). This needs the agent configured with ``append_dimensions: {"InstanceId":
  "${aws:InstanceId}"}`` and ``aggregation_dimensions: [["InstanceId"]]``; without the rollup every series
  also carries ``index``/``name``/``arch`` and a MetricStat on ``InstanceId`` alone finds nothing.
- ``host`` (SageMaker): ``/aws/sagemaker/TrainingJobs`` ``GPUUtilization`` / ``GPUMemoryUtilization`` with
  ``Host = <training job name>/algo-N``. SageMaker reports the sum over the host's GPUs (0..100 times GPUs), so
  the value is divided by the GPU count (``NodeRef.gpus``, else the instance type's in :mod:`osprey_control.catalog`).
- ``pod`` (EKS): Container Insights ``pod_gpu_utilization`` / ``pod_gpu_memory_utilization`` with
  ``ClusterName``, ``Namespace``, ``PodName``.
- every job with nodes, once: the runtime's ``InterconnectLatencyMicroseconds`` in ``/aws/osprey`` with
  exactly ``[Backend, JobId, Host]`` (``osprey.runtime``) of its *lead host* (below). The latency is timed
  with a collective that completes on every rank at once, so the runtime publishes it from the lead process
  only. The value lands on the lead node (see :func:`build_series`).
- every RUNNING job, once (:func:`build_progress_series`): the runtime's ``report_progress`` series
  ``RemainingSeconds`` of its lead host, statistic ``Minimum``: within a period the smallest remaining time
  is the latest report of a job that advances (each report's remaining time is lower than the one before),
  so a period never averages in older, larger values. The lead host is the first node in the registry's
  order (SageMaker ``algo-1``, Batch node 0, the EKS pod whose name sorts first): where rank 0 runs. Once
  per job rather than per node, since every rank reports the same progress and each series costs one
  GetMetricData metric per cycle.

How the runtime names a job and its hosts (the values of ``Backend``, ``JobId``, ``Host``) is each backend's
own (``DRIVER.runtime``, :mod:`osprey_control.backends.runtime_naming`); the names of the metrics, namespaces
and dimensions are :mod:`osprey_control.wiring`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from osprey_control.backends import RuntimeNaming, driver_for
from osprey_control.catalog import gpus_for_instance_type
from osprey_control.registry import JobKey, JobRecord, JobStatus, NodeKind, NodeRef, eks_job_id
from osprey_control.wiring import (
    CONTAINER_INSIGHTS_DIMENSIONS,
    CONTAINER_INSIGHTS_NAMESPACE,
    CWAGENT_DIMENSION,
    CWAGENT_GPU_UTILIZATION_METRIC,
    CWAGENT_MEMORY_TOTAL_METRIC,
    CWAGENT_MEMORY_USED_METRIC,
    CWAGENT_MEMORY_UTILIZATION_METRIC,
    CWAGENT_NAMESPACE,
    INTERCONNECT_LATENCY_METRIC,
    METRICS_NAMESPACE,
    POD_GPU_MEMORY_UTILIZATION_METRIC,
    POD_GPU_UTILIZATION_METRIC,
    REMAINING_SECONDS_METRIC,
    RUNTIME_DIMENSIONS,
    SAGEMAKER_DIMENSION,
    SAGEMAKER_GPU_MEMORY_UTILIZATION_METRIC,
    SAGEMAKER_GPU_UTILIZATION_METRIC,
    SAGEMAKER_NAMESPACE,
)

__all__ = [
    "QUERY_ID_PATTERN",
    "Needs",
    "SeriesSpec",
    "build_progress_series",
    "build_series",
    "lead_series",
    "metric_data_query",
]

QUERY_ID_PATTERN = re.compile(r"^[a-z][a-zA-Z0-9_]*$")

# The node metrics that come from CloudWatch (spot_interruption_risk comes from the registry record).
CLOUDWATCH_NODE_METRICS = frozenset(
    {"gpu_utilization", "memory_bandwidth_utilization", "gpu_memory_utilization", "node_interconnect_latency"}
)
# Which policy metrics a job needs (collect.needs.needs_from_policies); None: every series, as before.
Needs = Callable[[JobRecord], frozenset[str]] | None


@dataclass(frozen=True, slots=True)
class SeriesSpec:
    """One CloudWatch series and where its value goes: ``metric`` of ``node_id`` of ``job``.

    ``part`` is ``"used"`` / ``"total"`` for the two halves of the CWAgent memory ratio, else ``""``;
    ``divisor`` turns SageMaker's per-host sum into a per-GPU percent.
    """

    job: JobKey
    node_id: str
    metric: str
    namespace: str
    metric_name: str
    dimensions: tuple[tuple[str, str], ...]
    part: str = ""
    divisor: float = 1.0
    stat: str = "Average"
    # A job-level series (the runtime's remaining time): its value describes the job, not the node it names.
    job_level: bool = False


@dataclass(frozen=True, slots=True)
class BuildProblem:
    """A node whose series could not be built (the metric stays absent)."""

    job: JobKey
    kind: str
    message: str


def _naming(record: JobRecord) -> RuntimeNaming:
    """How the runtime names ``record``'s job and hosts: its backend's (``DRIVER.runtime``)."""
    return driver_for(record.backend).runtime


def _cwagent(job: JobKey, node: NodeRef, wanted: frozenset[str]) -> list[SeriesSpec]:
    dims = ((CWAGENT_DIMENSION, node.instance_id or node.node_id),)
    sources = (
        ("gpu_utilization", CWAGENT_GPU_UTILIZATION_METRIC, ""),
        ("memory_bandwidth_utilization", CWAGENT_MEMORY_UTILIZATION_METRIC, ""),
        ("gpu_memory_utilization", CWAGENT_MEMORY_USED_METRIC, "used"),
        ("gpu_memory_utilization", CWAGENT_MEMORY_TOTAL_METRIC, "total"),
    )
    return [
        SeriesSpec(job, node.node_id, metric, CWAGENT_NAMESPACE, name, dims, part)
        for metric, name, part in sources
        if metric in wanted
    ]


def _sagemaker(
    record: JobRecord, node: NodeRef, instance_type: str | None, wanted: frozenset[str]
) -> tuple[list[SeriesSpec], BuildProblem | None]:
    if not wanted & {"gpu_utilization", "gpu_memory_utilization"}:
        return [], None  # nothing to normalise, so an unknown GPU count is no problem either
    gpus = node.gpus or gpus_for_instance_type(instance_type)
    if not gpus:
        problem = BuildProblem(
            record.key,
            "gpus-unknown",
            f"GPU count of SageMaker host {node.node_id} is unknown, so its GPUUtilization (a sum over GPUs) "
            f"cannot be normalised; record NodeRef.gpus or use an instance type listed in "
            f"osprey_control.catalog (got {instance_type!r})",
        )
        return [], problem
    # SageMaker keys a host's metrics by "<training job>/algo-N"; the training job is the runtime's JobId.
    host = node.node_id if "/" in node.node_id else f"{_naming(record).job_id(record)}/{node.node_id}"
    dims = ((SAGEMAKER_DIMENSION, host),)
    specs = [
        SeriesSpec(record.key, node.node_id, metric, SAGEMAKER_NAMESPACE, name, dims, divisor=float(gpus))
        for metric, name in (
            ("gpu_utilization", SAGEMAKER_GPU_UTILIZATION_METRIC),
            ("gpu_memory_utilization", SAGEMAKER_GPU_MEMORY_UTILIZATION_METRIC),
        )
        if metric in wanted
    ]
    return specs, None


def _pod(
    record: JobRecord, node: NodeRef, wanted: frozenset[str]
) -> tuple[list[SeriesSpec], BuildProblem | None]:
    if not wanted & {"gpu_utilization", "gpu_memory_utilization"}:
        return [], None
    if not record.cluster:
        problem = BuildProblem(
            record.key, "cluster-unknown", "EKS job has no cluster name; Container Insights needs ClusterName"
        )
        return [], problem
    try:
        namespace = eks_job_id(record.native_id).namespace
    except ValueError:
        namespace = "default"
    dims = tuple(zip(CONTAINER_INSIGHTS_DIMENSIONS, (record.cluster, namespace, node.node_id), strict=True))
    specs = [
        SeriesSpec(record.key, node.node_id, metric, CONTAINER_INSIGHTS_NAMESPACE, name, dims)
        for metric, name in (
            ("gpu_utilization", POD_GPU_UTILIZATION_METRIC),
            ("gpu_memory_utilization", POD_GPU_MEMORY_UTILIZATION_METRIC),
        )
        if metric in wanted
    ]
    return specs, None


def build_series(
    records: Iterable[JobRecord],
    *,
    instance_type: Callable[[JobRecord, NodeRef], str | None] | None = None,
    osprey_namespace: str = METRICS_NAMESPACE,
    needs: Needs = None,
) -> tuple[list[SeriesSpec], list[BuildProblem]]:
    """Every series of every node of ``records``, in job order, plus the nodes that could not be queried.

    ``instance_type`` tells the SageMaker normalisation a host's instance type when ``NodeRef.gpus`` is unset.
    ``needs`` limits a job's series to the metrics its policy reads (each series is paid for on every read);
    None builds them all.

    The runtime's latency is one series per job, on the lead host (module docstring), and its value goes to
    the lead node only. That is the job's value: the engine aggregates a node rule over the nodes that have
    data, so ``mean``, ``min`` and ``max`` all return the lead's latency, as when the same value sits on every
    node (which is how :mod:`osprey_control.metrics.reuse` replays a decision).
    """
    specs: list[SeriesSpec] = []
    problems: list[BuildProblem] = []
    for record in records:
        wanted = CLOUDWATCH_NODE_METRICS if needs is None else needs(record) & CLOUDWATCH_NODE_METRICS
        for node in record.nodes:
            problem: BuildProblem | None = None
            if node.kind is NodeKind.INSTANCE:
                specs.extend(_cwagent(record.key, node, wanted))
            elif node.kind is NodeKind.HOST:
                found, problem = _sagemaker(
                    record, node, instance_type(record, node) if instance_type else None, wanted
                )
                specs.extend(found)
            else:
                found, problem = _pod(record, node, wanted)
                specs.extend(found)
            if problem is not None:
                problems.append(problem)
        lead = _lead_node(record)
        if lead is not None and "node_interconnect_latency" in wanted:
            node, host = lead
            runtime_dims = _runtime_dimensions(record, host)
            specs.append(
                SeriesSpec(
                    record.key,
                    node.node_id,
                    "node_interconnect_latency",
                    osprey_namespace,
                    INTERCONNECT_LATENCY_METRIC,
                    runtime_dims,
                )
            )
    return specs, problems


# (signal, runtime metric name, statistic): Minimum, the period's latest report of a job that advances.
PROGRESS_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("remaining_seconds", REMAINING_SECONDS_METRIC, "Minimum"),
)


def build_progress_series(
    records: Iterable[JobRecord], *, osprey_namespace: str = METRICS_NAMESPACE, needs: Needs = None
) -> list[SeriesSpec]:
    """The progress series of every RUNNING job's lead host (module docstring); queued jobs have none, nor do
    jobs whose policy has no ``remaining_time`` rule (``needs``)."""
    specs: list[SeriesSpec] = []
    for record in records:
        host = lead_host(record)
        if record.status is not JobStatus.RUNNING or host is None:
            continue
        if needs is not None and "remaining_time" not in needs(record):
            continue
        dims = _runtime_dimensions(record, host)
        specs.extend(
            SeriesSpec(record.key, host, signal, osprey_namespace, name, dims, stat=stat, job_level=True)
            for signal, name, stat in PROGRESS_SOURCES
        )
    return specs


def lead_host(record: JobRecord) -> str | None:
    """The runtime's ``Host`` where rank 0 usually runs; None when it cannot be known (an EKS job without pods)."""
    return _naming(record).lead_host(record)


def _runtime_dimensions(record: JobRecord, host: str) -> tuple[tuple[str, str], ...]:
    """The dimensions of the runtime's series of ``record`` on ``host``, as the runtime writes them."""
    naming = _naming(record)
    values = (naming.backend_dimension, naming.job_id(record), host)
    return tuple(zip(RUNTIME_DIMENSIONS, values, strict=True))


def _lead_node(record: JobRecord) -> tuple[NodeRef, str] | None:
    """The node the lead host's series describe, and that host; None for a job without nodes."""
    host = lead_host(record)
    if host is None or not record.nodes:
        return None
    naming = _naming(record)
    for position, node in enumerate(record.nodes):
        if naming.host(record, position, node) == host:
            return node, host
    return record.nodes[0], host


def lead_series(
    records: Iterable[JobRecord],
    signal: str,
    metric_name: str,
    *,
    stat: str = "Average",
    osprey_namespace: str = METRICS_NAMESPACE,
) -> list[SeriesSpec]:
    """One runtime series per job, on its lead host: for a value every rank shares (the step time or the
    collective latency of a synchronous job), which the runtime publishes from the lead process only."""
    specs: list[SeriesSpec] = []
    for record in records:
        host = lead_host(record)
        if host is None:
            continue
        dims = _runtime_dimensions(record, host)
        specs.append(
            SeriesSpec(
                record.key, host, signal, osprey_namespace, metric_name, dims, stat=stat, job_level=True
            )
        )
    return specs


def metric_data_query(query_id: str, spec: SeriesSpec, period: int) -> dict[str, Any]:
    """The GetMetricData ``MetricDataQueries`` entry for ``spec`` (a MetricStat, no math, no SEARCH)."""
    return {
        "Id": query_id,
        "MetricStat": {
            "Metric": {
                "Namespace": spec.namespace,
                "MetricName": spec.metric_name,
                "Dimensions": [{"Name": name, "Value": value} for name, value in spec.dimensions],
            },
            "Period": period,
            "Stat": spec.stat,
        },
        "ReturnData": True,
    }
