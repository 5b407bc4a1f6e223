"""A shard's derive step within the Lambda's time: :func:`osprey_control.cycle.run_shard` plus a deadline.

Kept apart from ``cycle.run_shard`` (which derives every job) until that function takes the deadline itself;
the report is the same, plus ``deferred``: the jobs not started before the deadline's margin, left as they were
in the registry for the next cycle, and ``fence_lost``: another execution took the lease, so this one stopped
writing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from osprey_control.collect import CollectionResult, collect, needs_from_policies
from osprey_control.coordination.deadline import Deadline
from osprey_control.cycle import ActiveJobs, ShardReport, _report
from osprey_control.derivation import CustomRuleInvoker
from osprey_control.derive.shard import PolicyLookup, derive_shard
from osprey_control.registry import JobRecord
from osprey_control.registry.fence import Fence
from osprey_control.telemetry import MetricPoint, shard_metrics

__all__ = ["DeriveRun", "derive_within"]


@dataclass
class DeriveRun:
    report: ShardReport
    deferred: list[JobRecord] = field(default_factory=list)
    fence_lost: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The state machine's view: the shard report's counts and how many jobs wait for the next cycle;
        ``fenceLost`` only when true, so a normal shard's output is as it was."""
        answer = {**self.report.to_dict(), "deferred": len(self.deferred)}
        if self.fence_lost:
            answer["fenceLost"] = True
        return answer


def derive_within(
    registry: ActiveJobs,
    policies: PolicyLookup,
    invoker: CustomRuleInvoker | None,
    deadline: Deadline,
    *,
    shard: int | None = None,
    cloudwatch: Any = None,
    now: datetime | None = None,
    per_job_metrics: bool = False,
    fence: Fence | None = None,
    prior: CollectionResult | None = None,
) -> DeriveRun:
    """Collect → derive → record for the active jobs of ``shard``, starting no job that would end after
    ``deadline``'s margin; with a ``fence``, every write is conditional on this execution's lease token.

    ``prior``: this shard's part of the cycle's collection (:mod:`osprey_control.collect_step`); only the jobs
    it lacks (registered since) are read here."""
    now = now or datetime.now(UTC)
    records = registry.list_active(shard)
    started = time.perf_counter()
    collected = _collected(records, prior, policies, cloudwatch, now)
    collection_ms = (time.perf_counter() - started) * 1000
    derived = derive_shard(
        records, collected.metrics, policies, registry, invoker, now=now, deadline=deadline, fence=fence
    )
    report = _report(shard, collected, derived)
    report.metrics = [
        *shard_metrics(derived, per_job=per_job_metrics),
        MetricPoint("CollectionLatencyMs", "Milliseconds", (collection_ms,)),
        MetricPoint("JobsDeferred", "Count", (float(len(derived.deferred)),), {"Step": "derive"}),
    ]
    return DeriveRun(report, derived.deferred, derived.fence_lost)


def _collected(
    records: list[JobRecord],
    prior: CollectionResult | None,
    policies: PolicyLookup,
    cloudwatch: Any,
    now: datetime,
) -> CollectionResult:
    # Only the series the jobs' policies read (GetMetricData bills each one requested).
    needs = needs_from_policies(policies)
    if prior is None:
        return collect(records, client=cloudwatch, now=now, needs=needs)
    missing = [record for record in records if record.key not in prior.metrics]
    own = collect(missing, client=cloudwatch, now=now, needs=needs) if missing else CollectionResult({})
    keys = {record.key for record in records}
    # The series and calls are this shard's own reads; the cycle's collection reported its own.
    merged = CollectionResult(
        {key: metrics for key, metrics in prior.metrics.items() if key in keys},
        {key: problems for key, problems in prior.problems.items() if key in keys},
        series=own.series,
        calls=own.calls,
        reused=own.reused,
    )
    merged.metrics.update(own.metrics)
    merged.problems.update(own.problems)
    return merged
