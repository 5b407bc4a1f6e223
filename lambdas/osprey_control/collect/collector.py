"""Collect one shard's metrics with GetMetricData: ⌈S/500⌉ calls per page of data for S series.

:func:`collect` builds the MetricStat queries (:mod:`osprey_control.collect.queries`), sends them in chunks of at
most 500, follows ``NextToken``, keeps the latest datapoint of each series inside the window and turns the
results into :class:`JobMetrics` in DESIGN §3 raw units. A series without a datapoint, with an error status, or in
a chunk whose call failed is absent from ``values`` (the rule is skipped), never zero. A failed chunk is isolated:
its jobs get no data and a recorded problem, every other chunk still counts.

The job-level values (``queue_wait``, ``attained_service``, ``remaining_time``, ``requested_gpus``) come from the
registry record plus, for a running job, the runtime's progress series, which ride in the same chunks
(:mod:`osprey_control.collect.job_level`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from osprey_control.aws import client_for, is_transient
from osprey_control.collect.job_level import ProgressPoints, job_values, progress_report
from osprey_control.collect.queries import (
    OSPREY_NAMESPACE,
    SeriesSpec,
    build_progress_series,
    build_series,
    metric_data_query,
)
from osprey_control.derivation.inputs import JobMetrics, NodeMetrics
from osprey_control.registry.model import JobKey, JobRecord, NodeRef

__all__ = [
    "MAX_QUERIES_PER_CALL",
    "CollectionProblem",
    "CollectionResult",
    "CollectorConfig",
    "Latest",
    "collect",
    "fetch_latest",
]

logger = logging.getLogger(__name__)

MAX_QUERIES_PER_CALL = 500  # the GetMetricData limit on MetricDataQueries


@dataclass(frozen=True, slots=True)
class CollectorConfig:
    """``window_seconds``: how far back the latest datapoint may be; ``period_seconds``: the MetricStat period."""

    window_seconds: int = 300
    period_seconds: int = 60
    max_queries_per_call: int = MAX_QUERIES_PER_CALL
    osprey_namespace: str = OSPREY_NAMESPACE

    def __post_init__(self) -> None:
        if not 1 <= self.max_queries_per_call <= MAX_QUERIES_PER_CALL:
            raise ValueError(f"max_queries_per_call must be 1..{MAX_QUERIES_PER_CALL}")
        if self.period_seconds < 1 or (
            self.period_seconds % 60 and self.period_seconds not in (1, 5, 10, 30)
        ):
            raise ValueError(
                "period_seconds must be 1, 5, 10, 30 or a multiple of 60 (the CloudWatch periods)"
            )
        if self.window_seconds < self.period_seconds:
            raise ValueError("window_seconds must be at least period_seconds")


@dataclass(frozen=True, slots=True)
class CollectionProblem:
    """Why some or all of a job's metrics are absent. ``transient``: worth retrying next cycle."""

    job: JobKey
    kind: str  # chunk-failed | series-error | partial-data | gpus-unknown | cluster-unknown
    message: str
    transient: bool = False


@dataclass(slots=True)
class CollectionResult:
    metrics: dict[JobKey, JobMetrics]
    problems: dict[JobKey, list[CollectionProblem]] = field(default_factory=dict)
    series: int = 0
    calls: int = 0

    def add_problem(self, problem: CollectionProblem) -> None:
        self.problems.setdefault(problem.job, []).append(problem)


# (timestamp, value) of the latest datapoint of each query id.
Latest = dict[str, tuple[datetime, float]]


def _merge_page(page: dict[str, Any], latest: Latest) -> dict[str, str]:
    """Fold one page's datapoints into ``latest``; return this page's status per query id."""
    statuses: dict[str, str] = {}
    for result in page.get("MetricDataResults", ()):
        query_id = result["Id"]
        statuses[query_id] = str(result.get("StatusCode", "Complete"))
        for stamp, value in zip(result.get("Timestamps", ()), result.get("Values", ()), strict=False):
            if not isinstance(value, int | float) or not math.isfinite(value):
                continue
            best = latest.get(query_id)
            if best is None or stamp > best[0]:
                latest[query_id] = (stamp, float(value))
    return statuses


def fetch_latest(
    client: Any, queries: list[dict[str, Any]], start: datetime, end: datetime
) -> tuple[Latest, dict[str, set[str]], int]:
    """Every page of one GetMetricData chunk (at most :data:`MAX_QUERIES_PER_CALL` queries): the latest
    datapoint per query id, the statuses that matter, and the number of calls.

    An error status on any page counts; PartialData counts only on the last page, since a NextToken page
    after it delivers the rest.
    """
    latest: Latest = {}
    statuses: dict[str, set[str]] = {}
    calls = 0
    token: str | None = None
    while True:
        request: dict[str, Any] = {
            "MetricDataQueries": queries,
            "StartTime": start,
            "EndTime": end,
            "ScanBy": "TimestampDescending",
        }
        if token:
            request["NextToken"] = token
        page = client.get_metric_data(**request)
        calls += 1
        page_statuses = _merge_page(page, latest)
        token = page.get("NextToken")
        for query_id, status in page_statuses.items():
            if status not in ("Complete", "PartialData") or (status == "PartialData" and not token):
                statuses.setdefault(query_id, set()).add(status)
        if not token:
            return latest, statuses, calls


def _memory_ratio(used: tuple[datetime, float] | None, total: tuple[datetime, float] | None) -> float | None:
    if used is None or total is None or total[1] <= 0:
        return None
    return 100.0 * used[1] / total[1]


def collect(
    records: Sequence[JobRecord],
    *,
    client: Any = None,
    config: CollectorConfig | None = None,
    now: datetime | None = None,
    instance_type: Callable[[JobRecord, NodeRef], str | None] | None = None,
) -> CollectionResult:
    """Metrics for every job of ``records``: a :class:`JobMetrics` per job, absent values for missing data.

    ``client`` is a CloudWatch client (created with :func:`osprey_control.aws.client_for` when None).
    """
    config = config or CollectorConfig()
    end = (now or datetime.now(UTC)).astimezone(UTC)
    start = end - timedelta(seconds=config.window_seconds)
    specs, build_problems = build_series(
        records, instance_type=instance_type, osprey_namespace=config.osprey_namespace
    )
    # In the same chunks (S counts them, the calls stay ceil(S/500)), right after their job's node series: a
    # stable sort by job keeps each job's series contiguous, so a failed chunk still costs only its own jobs.
    order = {record.key: index for index, record in enumerate(records)}
    progress = build_progress_series(records, osprey_namespace=config.osprey_namespace)
    specs = sorted([*specs, *progress], key=lambda spec: order[spec.job])
    result = CollectionResult(metrics={}, series=len(specs))
    for problem in build_problems:
        result.add_problem(CollectionProblem(problem.job, problem.kind, problem.message))

    latest: Latest = {}
    failed_jobs: set[JobKey] = set()
    ids = [f"q{index}" for index in range(len(specs))]
    size = config.max_queries_per_call
    if specs:
        client = client_for("cloudwatch", client)
    for offset in range(0, len(specs), size):
        chunk_specs = specs[offset : offset + size]
        chunk_ids = ids[offset : offset + size]
        queries = [
            metric_data_query(query_id, spec, config.period_seconds)
            for query_id, spec in zip(chunk_ids, chunk_specs, strict=True)
        ]
        try:
            chunk_latest, statuses, calls = fetch_latest(client, queries, start, end)
        except Exception as error:  # any failure of one chunk must not cost the other chunks their data
            result.calls += 1
            transient = is_transient(error)
            logger.warning(
                "metric chunk failed",
                extra={
                    "offset": offset,
                    "queries": len(queries),
                    "transient": transient,
                    "error": repr(error),
                },
            )
            for job in dict.fromkeys(spec.job for spec in chunk_specs):
                failed_jobs.add(job)
                result.add_problem(
                    CollectionProblem(
                        job,
                        "chunk-failed",
                        f"GetMetricData failed for this job's queries ({type(error).__name__}: {error}); its "
                        "rules are skipped this cycle. Throttling and 5xx clear on their own; AccessDenied "
                        "needs cloudwatch:GetMetricData on the collector role.",
                        transient=transient,
                    )
                )
            continue
        result.calls += calls
        latest.update(chunk_latest)
        _record_status_problems(result, chunk_specs, chunk_ids, statuses)

    _assemble(
        result,
        records=records,
        specs=specs,
        ids=ids,
        latest=latest,
        failed_jobs=failed_jobs,
        end=end,
        period_seconds=config.period_seconds,
    )
    return result


def _record_status_problems(
    result: CollectionResult, specs: Sequence[SeriesSpec], ids: Sequence[str], statuses: dict[str, set[str]]
) -> None:
    seen: set[tuple[JobKey, str]] = set()
    for query_id, spec in zip(ids, specs, strict=True):
        bad = statuses.get(query_id, set()) - {"Complete", "PartialData"}
        # PartialData on the last page means CloudWatch stopped early: what arrived is kept, the gap is noted.
        kind = (
            "series-error" if bad else "partial-data" if "PartialData" in statuses.get(query_id, ()) else ""
        )
        if not kind or (spec.job, kind) in seen:
            continue
        seen.add((spec.job, kind))
        detail = ", ".join(sorted(bad)) if bad else "PartialData"
        result.add_problem(
            CollectionProblem(
                spec.job,
                kind,
                f"{spec.namespace} {spec.metric_name} on {spec.node_id}: status {detail}; missing values are "
                "skipped, not read as zero",
                transient=True,
            )
        )


def _assemble(
    result: CollectionResult,
    *,
    records: Iterable[JobRecord],
    specs: Sequence[SeriesSpec],
    ids: Sequence[str],
    latest: Latest,
    failed_jobs: set[JobKey],
    end: datetime,
    period_seconds: int,
) -> None:
    per_node: dict[tuple[JobKey, str], dict[str, float]] = {}
    memory_parts: dict[tuple[JobKey, str], dict[str, tuple[datetime, float]]] = {}
    progress: dict[JobKey, ProgressPoints] = {}
    for query_id, spec in zip(ids, specs, strict=True):
        point = latest.get(query_id)
        if point is None or spec.job in failed_jobs:
            continue
        slot = (spec.job, spec.node_id)
        if spec.job_level:
            progress.setdefault(spec.job, {})[spec.metric] = point
        elif spec.part:
            memory_parts.setdefault(slot, {})[spec.part] = point
        else:
            per_node.setdefault(slot, {})[spec.metric] = point[1] / spec.divisor
    for slot, parts in memory_parts.items():
        ratio = _memory_ratio(parts.get("used"), parts.get("total"))
        if ratio is not None:
            per_node.setdefault(slot, {}).setdefault("gpu_memory_utilization", ratio)

    for record in records:
        key = record.key
        nodes: list[NodeMetrics] = []
        for node in record.nodes:
            values = {} if key in failed_jobs else dict(per_node.get((key, node.node_id), {}))
            # No warning received is a known 0 (DESIGN §3), unlike a missing metric.
            risk = record.spot_risk.get(node.instance_id or "", record.spot_risk.get(node.node_id, 0.0))
            values["spot_interruption_risk"] = float(risk)
            nodes.append(NodeMetrics(node.node_id, values))
        report = progress_report(progress.get(key, {}), period_seconds=period_seconds, end=end)
        result.metrics[key] = JobMetrics(
            job_id=str(key),
            nodes=tuple(nodes),
            job_values=job_values(record, end=end, progress=report),
            backend=record.backend.value,
            name=record.name,
        )
