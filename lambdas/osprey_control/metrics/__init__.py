"""Metric collection for a shard of jobs: CloudWatch GetMetricData MetricStat queries → ``JobMetrics``.

    >>> from osprey_control.metrics import collect
    >>> result = collect(records, client=cloudwatch)  # doctest: +SKIP
    >>> result.metrics[record.key].nodes[0].values["gpu_utilization"]  # doctest: +SKIP
    87.5

See ``docs/metrics-and-actuation.md`` for the sources, units, and the CloudWatch agent configuration assumed.
"""

from osprey_control.metrics.cadence import DEFAULT_EVERY_N_CYCLES, EVERY_N_CYCLES_VARIABLE, is_due, turn_of
from osprey_control.metrics.collector import (
    MAX_QUERIES_PER_CALL,
    CollectionProblem,
    CollectionResult,
    CollectorConfig,
    collect,
    fetch_latest,
    fetch_points,
)
from osprey_control.metrics.guard import (
    LOOKAHEAD_LIMITS,
    PoolVerdict,
    add_guard,
    guard_settings,
    pool_bound_ms,
)
from osprey_control.metrics.job_level import job_values
from osprey_control.metrics.needs import metrics_needed, needs_from_policies
from osprey_control.metrics.queries import (
    QUERY_ID_PATTERN,
    Needs,
    SeriesSpec,
    build_progress_series,
    build_series,
    lead_series,
    metric_data_query,
)
from osprey_control.metrics.reservation import add_reservations, pool_of
from osprey_control.metrics.snapshot import SnapshotError, decode, encode, split_by

__all__ = [
    "DEFAULT_EVERY_N_CYCLES",
    "EVERY_N_CYCLES_VARIABLE",
    "LOOKAHEAD_LIMITS",
    "MAX_QUERIES_PER_CALL",
    "QUERY_ID_PATTERN",
    "CollectionProblem",
    "CollectionResult",
    "CollectorConfig",
    "Needs",
    "PoolVerdict",
    "SeriesSpec",
    "SnapshotError",
    "add_guard",
    "add_reservations",
    "build_progress_series",
    "build_series",
    "collect",
    "decode",
    "encode",
    "fetch_latest",
    "fetch_points",
    "guard_settings",
    "is_due",
    "job_values",
    "lead_series",
    "metric_data_query",
    "metrics_needed",
    "needs_from_policies",
    "pool_bound_ms",
    "pool_of",
    "split_by",
    "turn_of",
]
