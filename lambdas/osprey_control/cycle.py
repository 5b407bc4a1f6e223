"""One shard of a cycle: list its active jobs, collect their metrics, derive and record their priorities.

The cycle state machine runs this once per shard (a Map state). What it returns to the state machine is the
same size whatever the shard holds (docs/control-plane.md, Payload): counts and at most
:data:`FAILURE_SAMPLE` failures, never per-job records. The jobs whose derived priority still has to reach
the backend are in the registry's ``apply-pending`` index, where the apply step finds them (Batch needs one
UpdateSchedulingPolicy per queue per cycle, so it takes every shard's jobs at once).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from osprey_control.apply_step import ERROR_CHARS, FAILURE_SAMPLE
from osprey_control.collect import CollectionResult, collect, needs_from_policies
from osprey_control.derivation import CustomRuleInvoker
from osprey_control.derive import DecisionStore, PolicySource, ShardResult, derive_shard
from osprey_control.registry import JobRecord
from osprey_control.telemetry import MetricPoint, shard_metrics

__all__ = ["ActiveJobs", "ShardReport", "run_shard"]


class ActiveJobs(DecisionStore, Protocol):
    def list_active(self, shard: int | None = None) -> list[JobRecord]: ...


@dataclass
class ShardReport:
    """A shard's result. ``changes`` (the pending jobs) and ``failures`` (all of them) are for in-process
    callers (the CLI, benches, tests); the state machine gets :meth:`to_dict`, counts and a sample."""

    shard: int | None
    evaluated: int
    changes: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)
    series: int = 0
    getmetricdata_calls: int = 0
    metrics: list[MetricPoint] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The state machine's view: JSON-able and bounded in size (no per-job list), without the metric
        points (those go to EMF). ``jobs_failed`` and not ``failed``: the Map marks a failed shard with
        ``failed: true``."""
        return {
            "shard": self.shard,
            "evaluated": self.evaluated,
            "pending": len(self.changes),
            "jobs_failed": len(self.failures),
            "failures": [
                {**failure, "error": failure.get("error", "")[:ERROR_CHARS]}
                for failure in self.failures[:FAILURE_SAMPLE]
            ],
            "series": self.series,
            "getmetricdata_calls": self.getmetricdata_calls,
        }


def _report(shard: int | None, collected: CollectionResult, derived: ShardResult) -> ShardReport:
    report = ShardReport(
        shard, len(derived.outcomes), series=collected.series, getmetricdata_calls=collected.calls
    )
    # Every job whose derived priority is not on the backend yet, whether it was derived this cycle or is a
    # transient failure of an earlier one being retried (counted in the report; the apply step reads the
    # registry's apply-pending index, which holds the same jobs).
    for outcome in derived.pending:
        current = outcome.current
        report.changes.append(
            {
                "key": str(current.key),
                "backend": current.backend.value,
                "native_id": current.native_id,
                "previous": current.applied_priority,  # on the backend now (None: never applied)
                "priority": current.derived_priority,
                "changed": outcome.changed,  # derived moved this cycle (else: a retry)
            }
        )
    for outcome in derived.failures:
        report.failures.append(
            {"key": str(outcome.record.key), "kind": outcome.error_kind or "", "error": outcome.error or ""}
        )
    return report


def run_shard(
    registry: ActiveJobs,
    policies: PolicySource,
    invoker: CustomRuleInvoker | None,
    *,
    shard: int | None = None,
    cloudwatch: Any = None,
    now: datetime | None = None,
    per_job_metrics: bool = False,
) -> ShardReport:
    """Collect → derive → record for the active jobs of ``shard`` (all shards when None)."""
    now = now or datetime.now(UTC)
    records = registry.list_active(shard)
    started = time.perf_counter()
    # Only the series the jobs' policies read (GetMetricData bills each one requested).
    collected = collect(records, client=cloudwatch, now=now, needs=needs_from_policies(policies))
    collection_ms = (time.perf_counter() - started) * 1000
    derived = derive_shard(records, collected.metrics, policies, registry, invoker, now=now)
    report = _report(shard, collected, derived)
    report.metrics = [
        *shard_metrics(derived, per_job=per_job_metrics),
        MetricPoint("CollectionLatencyMs", "Milliseconds", (collection_ms,)),
    ]
    return report
