"""Collect one shard's metrics with GetMetricData: ⌈S/500⌉ calls per page of data for S series.

:func:`collect` builds the MetricStat queries (:mod:`osprey_control.metrics.queries`), sends them in chunks of at
most 500, follows ``NextToken``, keeps the latest datapoint of each series inside the window and turns the
results into :class:`JobMetrics` in docs/design.md §3 raw units. A series without a datapoint, with an error status, or in
a chunk whose call failed is absent from ``values`` (the rule is skipped), never zero. A failed chunk is isolated:
its jobs get no data and a recorded problem, every other chunk still counts.

The job-level values (``queue_wait``, ``attained_service``, ``remaining_time``, ``requested_gpus``) come from the
registry record plus, for a running job, the runtime's progress series, which ride in the same chunks
(:mod:`osprey_control.metrics.job_level`).

Cost: ``needs`` (:func:`osprey_control.metrics.needs.needs_from_policies`) limits each job to the series its
policy reads; ``CollectorConfig.every_n_cycles`` N reads each job on one cycle in N
(:mod:`osprey_control.metrics.cadence`) and derives it from its last decision's values on the others
(:mod:`osprey_control.metrics.reuse`). A read then covers the N cycles since the previous one: a gauge's value
is the mean of its datapoints over that span (N = 1: the latest datapoint, as always).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from osprey_control.aws import client_for
from osprey_control.derivation import JobMetrics, NodeMetrics
from osprey_control.errors import is_transient
from osprey_control.metrics.cadence import is_due, read_setting
from osprey_control.metrics.job_level import ProgressPoints, job_values, progress_report
from osprey_control.metrics.queries import (
    CLOUDWATCH_NODE_METRICS,
    Needs,
    SeriesSpec,
    build_progress_series,
    build_series,
    metric_data_query,
)
from osprey_control.metrics.reuse import REUSABLE_METRICS, Reused, reused_values
from osprey_control.registry import JobKey, JobRecord, JobStatus, NodeRef
from osprey_control.wiring import METRICS_NAMESPACE

__all__ = [
    "MAX_QUERIES_PER_CALL",
    "CollectionProblem",
    "CollectionResult",
    "CollectorConfig",
    "collect",
    "fetch_latest",
    "fetch_points",
]

logger = logging.getLogger(__name__)

MAX_QUERIES_PER_CALL = 500  # the GetMetricData limit on MetricDataQueries


@dataclass(frozen=True, slots=True)
class CollectorConfig:
    """``window_seconds``: how far back the latest datapoint may be; ``period_seconds``: the MetricStat period;
    ``every_n_cycles``: read each job on one cycle in N (1: every cycle); ``cycle_seconds``: the cycle interval,
    which numbers the cycles (:mod:`osprey_control.metrics.cadence`)."""

    window_seconds: int = 300
    period_seconds: int = 60
    max_queries_per_call: int = MAX_QUERIES_PER_CALL
    osprey_namespace: str = METRICS_NAMESPACE
    every_n_cycles: int = 1
    cycle_seconds: int = 60

    @classmethod
    def from_environment(cls, environment: Mapping[str, str] | None = None) -> CollectorConfig:
        """The defaults plus ``OSPREY_METRICS_EVERY_N_CYCLES`` and ``OSPREY_CYCLE_SECONDS`` (the derive
        function's environment, set by the CDK app)."""
        every, cycle = read_setting(environment)
        return cls(every_n_cycles=every, cycle_seconds=cycle)

    @property
    def span_seconds(self) -> int:
        """What one read covers: the N cycles since the job's previous read (at least one period)."""
        return self.every_n_cycles * max(self.cycle_seconds, self.period_seconds)

    @property
    def read_window_seconds(self) -> int:
        return max(self.window_seconds, self.span_seconds)

    def __post_init__(self) -> None:
        if self.every_n_cycles < 1 or self.cycle_seconds < 1:
            raise ValueError("every_n_cycles and cycle_seconds must be at least 1")
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
    # Jobs not read this cycle (not their turn) and derived from their last decision's values instead.
    reused: int = 0

    def add_problem(self, problem: CollectionProblem) -> None:
        self.problems.setdefault(problem.job, []).append(problem)


# (timestamp, value) of the latest datapoint of each query id.
Latest = dict[str, tuple[datetime, float]]
# Every finite datapoint of each query id, by timestamp (a timestamp seen twice keeps its last value).
Points = dict[str, dict[datetime, float]]


def _merge_page(page: dict[str, Any], points: Points) -> dict[str, str]:
    """Fold one page's datapoints into ``points``; return this page's status per query id."""
    statuses: dict[str, str] = {}
    for result in page.get("MetricDataResults", ()):
        query_id = result["Id"]
        statuses[query_id] = str(result.get("StatusCode", "Complete"))
        for stamp, value in zip(result.get("Timestamps", ()), result.get("Values", ()), strict=False):
            if not isinstance(value, int | float) or not math.isfinite(value):
                continue
            points.setdefault(query_id, {})[stamp] = float(value)
    return statuses


def _latest(points: Points) -> Latest:
    return {query_id: max(found.items()) for query_id, found in points.items() if found}


def fetch_latest(
    client: Any, queries: list[dict[str, Any]], start: datetime, end: datetime
) -> tuple[Latest, dict[str, set[str]], int]:
    """Every page of one GetMetricData chunk (at most :data:`MAX_QUERIES_PER_CALL` queries): the latest
    datapoint per query id, the statuses that matter, and the number of calls (:func:`fetch_points`)."""
    points, statuses, calls = fetch_points(client, queries, start, end)
    return _latest(points), statuses, calls


def fetch_points(
    client: Any, queries: list[dict[str, Any]], start: datetime, end: datetime
) -> tuple[Points, dict[str, set[str]], int]:
    """Every page of one GetMetricData chunk: every datapoint per query id, the statuses that matter, and the
    number of calls.

    An error status on any page counts; PartialData counts only on the last page, since a NextToken page
    after it delivers the rest.
    """
    points: Points = {}
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
        page_statuses = _merge_page(page, points)
        token = page.get("NextToken")
        for query_id, status in page_statuses.items():
            if status not in ("Complete", "PartialData") or (status == "PartialData" and not token):
                statuses.setdefault(query_id, set()).add(status)
        if not token:
            return points, statuses, calls


def _memory_ratio(used: float | None, total: float | None) -> float | None:
    if used is None or total is None or total <= 0:
        return None
    return 100.0 * used / total


def _split(
    records: Sequence[JobRecord], config: CollectorConfig, now: datetime, needs: Needs
) -> tuple[list[JobRecord], dict[JobKey, Reused]]:
    """The jobs read this cycle, and the values of the others (not their turn, last decision reusable)."""
    if config.every_n_cycles <= 1:
        return list(records), {}
    read: list[JobRecord] = []
    reused: dict[JobKey, Reused] = {}
    for record in records:
        if not is_due(
            record.key, now, every_n_cycles=config.every_n_cycles, cycle_seconds=config.cycle_seconds
        ):
            needed = None if needs is None else needs(record) & REUSABLE_METRICS
            found = reused_values(record.last_decision, needed)
            if found is not None:
                reused[record.key] = found
                continue
        read.append(record)
    return read, reused


def collect(
    records: Sequence[JobRecord],
    *,
    client: Any = None,
    config: CollectorConfig | None = None,
    now: datetime | None = None,
    instance_type: Callable[[JobRecord, NodeRef], str | None] | None = None,
    needs: Needs = None,
) -> CollectionResult:
    """Metrics for every job of ``records``: a :class:`JobMetrics` per job, absent values for missing data.

    ``client`` is a CloudWatch client (created with :func:`osprey_control.aws.client_for` when None).
    ``config`` None reads :meth:`CollectorConfig.from_environment`: the derive function's environment sets the
    cadence. ``needs``: the metrics each job's policy reads (:func:`~osprey_control.metrics.needs.needs_from_policies`);
    None queries every series.
    """
    config = config or CollectorConfig.from_environment()
    end = (now or datetime.now(UTC)).astimezone(UTC)
    start = end - timedelta(seconds=config.read_window_seconds)
    read, reused = _split(records, config, end, needs)
    specs, build_problems = build_series(
        read, instance_type=instance_type, osprey_namespace=config.osprey_namespace, needs=needs
    )
    # In the same chunks (S counts them, the calls stay ceil(S/500)), right after their job's node series: a
    # stable sort by job keeps each job's series contiguous, so a failed chunk still costs only its own jobs.
    order = {record.key: index for index, record in enumerate(records)}
    progress = build_progress_series(read, osprey_namespace=config.osprey_namespace, needs=needs)
    specs = sorted([*specs, *progress], key=lambda spec: order[spec.job])
    result = CollectionResult(metrics={}, series=len(specs), reused=len(reused))
    for problem in build_problems:
        result.add_problem(CollectionProblem(problem.job, problem.kind, problem.message))

    points: Points = {}
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
            chunk_points, statuses, calls = fetch_points(client, queries, start, end)
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
        points.update(chunk_points)
        _record_status_problems(result, chunk_specs, chunk_ids, statuses)

    _assemble(
        result,
        records=records,
        specs=specs,
        ids=ids,
        points=points,
        failed_jobs=failed_jobs,
        reused=reused,
        end=end,
        config=config,
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


def _gauge(found: Mapping[datetime, float], span_seconds: int) -> tuple[datetime, float]:
    """The latest timestamp and the mean of the datapoints less than ``span_seconds`` before it: the span since
    the previous read, so a dip between reads is not lost (one period: just the latest datapoint)."""
    latest = max(found)
    recent = [value for stamp, value in found.items() if (latest - stamp).total_seconds() < span_seconds]
    return latest, math.fsum(recent) / len(recent)


def _assemble(
    result: CollectionResult,
    *,
    records: Iterable[JobRecord],
    specs: Sequence[SeriesSpec],
    ids: Sequence[str],
    points: Points,
    failed_jobs: set[JobKey],
    reused: Mapping[JobKey, Reused],
    end: datetime,
    config: CollectorConfig,
) -> None:
    per_node: dict[tuple[JobKey, str], dict[str, float]] = {}
    memory_parts: dict[tuple[JobKey, str], dict[str, float]] = {}
    progress: dict[JobKey, ProgressPoints] = {}
    for query_id, spec in zip(ids, specs, strict=True):
        found = points.get(query_id)
        if not found or spec.job in failed_jobs:
            continue
        slot = (spec.job, spec.node_id)
        if spec.job_level:
            # The runtime's remaining seconds: only the newest datapoint dates the progress report.
            progress.setdefault(spec.job, {})[spec.metric] = max(found.items())
            continue
        _stamp, value = _gauge(found, config.span_seconds)
        if spec.part:
            memory_parts.setdefault(slot, {})[spec.part] = value
        else:
            per_node.setdefault(slot, {})[spec.metric] = value / spec.divisor
    for slot, parts in memory_parts.items():
        ratio = _memory_ratio(parts.get("used"), parts.get("total"))
        if ratio is not None:
            per_node.setdefault(slot, {}).setdefault("gpu_memory_utilization", ratio)

    for record in records:
        key = record.key
        kept = reused.get(key)
        nodes: list[NodeMetrics] = []
        for node in record.nodes:
            if kept is not None:
                values = {m: v for m, v in kept.node_values.items() if m in CLOUDWATCH_NODE_METRICS}
            else:
                values = {} if key in failed_jobs else dict(per_node.get((key, node.node_id), {}))
            # No warning received is a known 0 (docs/design.md §3), unlike a missing metric.
            risk = record.spot_risk.get(node.instance_id or "", record.spot_risk.get(node.node_id, 0.0))
            values["spot_interruption_risk"] = float(risk)
            nodes.append(NodeMetrics(node.node_id, values))
        report = progress_report(progress.get(key, {}), period_seconds=config.period_seconds, end=end)
        fresh = job_values(record, end=end, progress=report)
        if kept is not None and kept.remaining_time is not None and record.status is JobStatus.RUNNING:
            # The progress series were not read either: keep the value the last decision used.
            fresh = {**fresh, "remaining_time": kept.remaining_time}
        result.metrics[key] = JobMetrics(
            job_id=str(key),
            nodes=tuple(nodes),
            job_values=fresh,
            backend=record.backend.value,
            name=record.name,
        )
