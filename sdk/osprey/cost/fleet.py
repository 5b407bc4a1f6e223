"""A synthetic fleet of N nodes x G GPUs running J jobs, and what it costs to watch: the series the collector
queries (built by :mod:`osprey_control.metrics.queries` itself, then counted), the shards the jobs fall in
(:func:`osprey_control.registry.items.shard_of`), the runtime's EMF series and the agent's custom metrics
(from the CloudWatch agent configuration). Pure: the agent configuration is passed in as a dict.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from osprey_control.contract import OspreyBlock
from osprey_control.metrics import MAX_QUERIES_PER_CALL, Needs, build_progress_series, build_series, turn_of
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus, NodeKind, NodeRef, shard_of
from osprey_control.wiring import CWAGENT_DIMENSION, METRICS_NAMESPACE

__all__ = ["FleetShape", "agent_metrics", "metric_load", "synthetic_fleet"]

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

DEFAULT_POLICY = "default-policy"


@dataclass(frozen=True, slots=True)
class FleetShape:
    nodes: int
    gpus_per_node: int
    jobs: int
    policy: str = DEFAULT_POLICY  # every job's priorityDerivationProfile


def synthetic_fleet(shape: FleetShape) -> list[JobRecord]:
    """J Batch jobs on N EC2 GPU instances (CloudWatch agent metrics: the most series per node), the nodes
    dealt out as evenly as possible. With more jobs than nodes the jobs left over are queued (no nodes)."""
    records: list[JobRecord] = []
    base, extra = divmod(shape.nodes, shape.jobs)
    next_node = 0
    for index in range(shape.jobs):
        count = base + (1 if index < extra else 0)
        nodes = tuple(
            NodeRef(
                node_id=f"i-{next_node + offset:017x}",
                kind=NodeKind.INSTANCE,
                gpus=shape.gpus_per_node,
                node_index=offset,
            )
            for offset in range(count)
        )
        next_node += count
        records.append(
            JobRecord(
                backend=Backend.BATCH,
                native_id=f"{index:08d}-0000-4000-8000-000000000000",
                name=f"job-{index}",
                block=OspreyBlock(priority_derivation_profile=shape.policy),
                status=JobStatus.RUNNING if nodes else JobStatus.PENDING,
                status_time=_EPOCH,
                nodes=nodes,
            )
        )
    return records


@dataclass(frozen=True, slots=True)
class MetricLoad:
    """Per read of every job: series the collector requests (node series, the runtime's job-level series),
    GetMetricData calls (one collection for the cycle: ``ceil(series / 500)``), jobs per non-empty shard, the
    runtime EMF series the control plane reads (metric-months), and each job's (job key, series) so a cadence
    can be applied (:meth:`per_cycle`)."""

    node_series: int
    progress_series: int
    calls: int
    jobs_per_shard: dict[int, int]
    runtime_series: int
    per_job: tuple[tuple[JobKey, int], ...] = ()

    def per_cycle(self, every_n_cycles: int) -> tuple[float, float]:
        """Series and GetMetricData calls of an average cycle when each job is read on one cycle in N (its
        turn, :func:`osprey_control.metrics.cadence.turn_of`): ``ceil(due series / 500)`` calls on each of
        the N cycles (the collect step reads every shard at once)."""
        if every_n_cycles <= 1:
            return float(self.series), float(self.calls)
        due: Counter[int] = Counter()
        for job, series in self.per_job:
            due[turn_of(job, every_n_cycles)] += series
        calls = sum(math.ceil(due[turn] / MAX_QUERIES_PER_CALL) for turn in range(every_n_cycles))
        return self.series / every_n_cycles, calls / every_n_cycles

    @property
    def series(self) -> int:
        return self.node_series + self.progress_series

    @property
    def busy_shards(self) -> int:
        return len(self.jobs_per_shard)


def metric_load(records: list[JobRecord], shards: int, *, needs: Needs | str = "shipped") -> MetricLoad:
    """Build the collector's queries for ``records`` (as the collect step does) and count them.

    ``needs``: which metrics each job's policy reads; ``"shipped"`` (default) the shipped ``policies/``
    (:func:`osprey.cost.source.shipped_needs`), None every series."""
    if isinstance(needs, str):
        from osprey.cost.source import shipped_needs  # noqa: PLC0415 - the only I/O, kept in source

        needs = shipped_needs()
    specs, _problems = build_series(records, needs=needs)
    progress = build_progress_series(records, needs=needs)
    everything = [*specs, *progress]
    counts = Counter(spec.job for spec in everything)
    return MetricLoad(
        node_series=len(specs),
        progress_series=len(progress),
        calls=math.ceil(len(everything) / MAX_QUERIES_PER_CALL),
        jobs_per_shard=dict(Counter(shard_of(record.key, shards) for record in records)),
        # What the runtime must publish for the control plane: every series it reads in Osprey's namespace.
        runtime_series=sum(1 for spec in everything if spec.namespace == METRICS_NAMESPACE),
        per_job=tuple((record.key, counts[record.key]) for record in records),
    )


@dataclass(frozen=True, slots=True)
class AgentMetrics:
    """What the CloudWatch agent publishes per node: custom metrics, and PutMetricData requests per month."""

    per_node: int
    measurements: tuple[str, ...]
    flush_seconds: int


def agent_metrics(config: Mapping[str, Any], *, gpus_per_node: int, efa_devices: int = 4) -> AgentMetrics:
    """Custom metrics one node publishes under the agent ``config``: one ``InstanceId`` rollup per measurement
    when ``aggregation_dimensions`` has ``["InstanceId"]``, plus the originals (one per GPU for
    ``nvidia_gpu``, one per device for ``efa``) unless ``drop_original_metrics`` lists them."""
    metrics = config.get("metrics") or {}
    rollup = [CWAGENT_DIMENSION] in (metrics.get("aggregation_dimensions") or [])
    originals_per_section = {"nvidia_gpu": gpus_per_node, "efa": efa_devices}
    per_node = 0
    names: list[str] = []
    for section, body in (metrics.get("metrics_collected") or {}).items():
        dropped = set(body.get("drop_original_metrics") or ())
        for measurement in body.get("measurement") or ():
            name = measurement if isinstance(measurement, str) else str(measurement.get("name"))
            names.append(f"{section}.{name}")
            per_node += 1 if rollup else 0
            if name not in dropped:
                per_node += originals_per_section.get(section, 1)
    flush = int(
        metrics.get("force_flush_interval")
        or (config.get("agent") or {}).get("metrics_collection_interval")
        or 60
    )
    return AgentMetrics(per_node, tuple(names), flush)
