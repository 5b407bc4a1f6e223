"""What a derive step and a finished cycle publish (docs/design.md §8), as plain data points; handlers emit them as EMF.

Pure: building the points needs no AWS and no Powertools, so the simulator and tests use the same code.
Per-job dimensions multiply CloudWatch cost by the fleet size, so they are off unless asked for.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from osprey_control.wiring import (
    BACKEND_DIMENSION,
    CUSTOM_RULE_FAILURES_METRIC,
    CYCLE_DURATION_METRIC,
    CYCLES_FAILED_METRIC,
    CYCLES_SUCCEEDED_METRIC,
    DERIVATION_ERRORS_METRIC,
    DERIVED_PRIORITY_METRIC,
    FAILED_JOBS_METRIC,
    FAILED_SHARDS_METRIC,
    GUARD_EVALUATIONS_METRIC,
    GUARD_FAILURES_METRIC,
    GUARD_STOOD_DOWN_METRIC,
    JOB_DIMENSION,
    JOBS_EVALUATED_METRIC,
    KIND_DIMENSION,
    METRICS_MISSING_METRIC,
    POLICY_DIMENSION,
    PRIORITY_CHANGE_METRIC,
    REASON_DIMENSION,
)

if TYPE_CHECKING:  # the annotation only: the apply and finish functions publish points without the engine
    from osprey_control.derivation import Decision

__all__ = [
    "CycleSummary",
    "DerivedShard",
    "GuardedPool",
    "MetricPoint",
    "cycle_metrics",
    "guard_metrics",
    "shard_metrics",
    "summarise_cycle",
]


class _Job(Protocol):
    @property
    def policy(self) -> str: ...
    @property
    def key(self) -> object: ...


class _JobOutcome(Protocol):
    """What :func:`shard_metrics` reads of a job's outcome (``osprey_control.steps.derive.JobOutcome``)."""

    @property
    def record(self) -> _Job: ...
    @property
    def decision(self) -> Decision | None: ...
    @property
    def error_kind(self) -> str | None: ...


class DerivedShard(Protocol):
    """What :func:`shard_metrics` reads of a derived shard (``osprey_control.steps.derive.ShardResult``)."""

    @property
    def outcomes(self) -> Sequence[_JobOutcome]: ...
    @property
    def custom_rule_failures(self) -> Mapping[str, int]: ...


@dataclass(frozen=True)
class MetricPoint:
    """One metric for one set of dimensions; several values make one EMF record with a value array."""

    name: str
    unit: str  # a CloudWatch unit name: Count, None, Milliseconds, Seconds
    values: tuple[float, ...]
    dimensions: dict[str, str] = field(default_factory=dict)


def shard_metrics(result: DerivedShard, *, per_job: bool = False) -> list[MetricPoint]:
    """DerivedPriority and PriorityChange per policy (and per job when ``per_job``), JobsEvaluated,
    CustomRuleFailures by reason, MetricsMissing (rules skipped for lack of data), DerivationErrors by kind."""
    priorities: dict[str, list[float]] = defaultdict(list)
    changes: dict[str, list[float]] = defaultdict(list)
    points: list[MetricPoint] = []
    missing = 0
    errors: Counter[str] = Counter()
    for outcome in result.outcomes:
        if outcome.error_kind is not None:
            errors[outcome.error_kind] += 1
        decision = outcome.decision
        if decision is None:
            continue
        policy = outcome.record.policy
        change = float(decision.priority - decision.previous)
        priorities[policy].append(float(decision.priority))
        changes[policy].append(change)
        missing += sum(1 for rule in decision.rules if rule.outcome in ("no-data", "invalid-data"))
        if per_job:
            job = {POLICY_DIMENSION: policy, JOB_DIMENSION: str(outcome.record.key)}
            points.append(MetricPoint(DERIVED_PRIORITY_METRIC, "None", (float(decision.priority),), job))
            points.append(MetricPoint(PRIORITY_CHANGE_METRIC, "None", (change,), job))
    for policy in sorted(priorities):
        by_policy = {POLICY_DIMENSION: policy}
        points.append(MetricPoint(DERIVED_PRIORITY_METRIC, "None", tuple(priorities[policy]), by_policy))
        points.append(MetricPoint(PRIORITY_CHANGE_METRIC, "None", tuple(changes[policy]), by_policy))
    points.append(MetricPoint(JOBS_EVALUATED_METRIC, "Count", (float(len(result.outcomes)),)))
    points.append(MetricPoint(METRICS_MISSING_METRIC, "Count", (float(missing),)))
    for reason, count in sorted(result.custom_rule_failures.items()):
        points.append(
            MetricPoint(CUSTOM_RULE_FAILURES_METRIC, "Count", (float(count),), {REASON_DIMENSION: reason})
        )
    for kind, count in sorted(errors.items()):
        points.append(MetricPoint(DERIVATION_ERRORS_METRIC, "Count", (float(count),), {KIND_DIMENSION: kind}))
    return points


class GuardedPool(Protocol):
    """What :func:`guard_metrics` reads of one pool's guard (``osprey_control.metrics.PoolVerdict``)."""

    @property
    def backend(self) -> str: ...
    @property
    def chosen(self) -> str | None: ...  # None: no verdict (not guarded, or failed)
    @property
    def stood_down(self) -> bool: ...
    @property
    def failed(self) -> bool: ...


def guard_metrics(pools: Sequence[GuardedPool]) -> list[MetricPoint]:
    """Per backend, for the pools the guard ran for this cycle: GuardStoodDown (one value per guarded pool, 1
    when it stood down to the native order, 0 when it chose a policy order: Sum is the pools stood down,
    SampleCount the pools guarded, Average the share), GuardEvaluations (pools guarded) and GuardFailures (pools
    whose guard raised; 0 included, so an alarm sees a healthy cycle rather than no data).

    Dimension ``Backend`` only: a pool (a cluster or queue name) would multiply the series by the fleet's
    pools; the collect step's log has one ``guard verdict`` line per pool. Pools not guarded by configuration
    (no capacity, disabled) are not counted: they say so in their jobs' notes."""
    stood: dict[str, list[float]] = defaultdict(list)
    failed: Counter[str] = Counter()
    backends: set[str] = set()
    for pool in pools:
        if pool.failed:
            failed[pool.backend] += 1
            backends.add(pool.backend)
        elif pool.chosen is not None:
            stood[pool.backend].append(1.0 if pool.stood_down else 0.0)
            backends.add(pool.backend)
    points: list[MetricPoint] = []
    for backend in sorted(backends):
        dimensions = {BACKEND_DIMENSION: backend}
        points.append(MetricPoint(GUARD_STOOD_DOWN_METRIC, "Count", tuple(stood[backend]), dimensions))
        points.append(
            MetricPoint(GUARD_EVALUATIONS_METRIC, "Count", (float(len(stood[backend])),), dimensions)
        )
        points.append(MetricPoint(GUARD_FAILURES_METRIC, "Count", (float(failed[backend]),), dimensions))
    return points


@dataclass(frozen=True)
class CycleSummary:
    """How one cycle ended. ``outcome`` is the state machine's path ("succeeded": derive and apply ran);
    ``failed_shards`` are the shards whose derive step failed (their jobs kept their priorities this cycle),
    ``failed_jobs`` the jobs whose derivation or apply failed in the shards that did report, as far as the
    reports name them (each names at most a few: the state machine's payload must not grow with the fleet),
    and ``failed_job_count`` how many there were (None: ``len(failed_jobs)``)."""

    outcome: str
    failed_shards: tuple[int | None, ...] = ()
    failed_jobs: tuple[str, ...] = ()
    failed_job_count: int | None = None

    @property
    def jobs_failed(self) -> int:
        return len(self.failed_jobs) if self.failed_job_count is None else self.failed_job_count

    @property
    def clean(self) -> bool:
        """A success with every shard derived. A failed shard is not a clean cycle even though the execution
        succeeds (the other shards' changes are applied): counting it as one hid a shard that never runs."""
        return self.outcome == "succeeded" and not self.failed_shards


def summarise_cycle(outcome: str, state: Mapping[str, Any] | None) -> CycleSummary:
    """Summarise the cycle state machine's state as Finish sees it: ``plan`` (PlanShards), ``shards`` (the
    Map's reports; a failed shard is ``{"shard", "failed": true, "error"}``), ``apply`` (ApplyPriorities).

    Any of them is absent when the cycle failed before that step. When the Map itself failed (``plan`` but no
    ``shards``) none of the planned shards reached apply, so all of them count as failed.

    Failed jobs are counted from ``jobs_failed`` (derive, per shard) and ``failed`` (apply), each with a
    sample under ``failures``; a job named in both samples counts once (beyond the samples a job failing in
    derive and apply counts twice). Reports of the older shape (``failures`` lists every job, apply's
    ``failed`` is a list) are read too.
    """
    state = state or {}
    plan = _mapping(state.get("plan"))
    reports = state.get("shards")
    failed_shards: list[int | None] = []
    derived: dict[str, None] = {}  # insertion-ordered sets of the named jobs
    derive_count = 0
    if isinstance(reports, list):
        for report in map(_mapping, reports):
            if report.get("failed"):
                failed_shards.append(_shard(report.get("shard")))
            named = _keys(report.get("failures"))
            derived.update(dict.fromkeys(named))
            derive_count += _count(report.get("jobs_failed"), len(named))
    elif outcome == "failed" and isinstance(plan.get("shards"), list):
        failed_shards.extend(_shard(shard) for shard in plan["shards"])
    apply = _mapping(state.get("apply"))
    failed = apply.get("failed")
    applied = _keys(failed if isinstance(failed, list) else apply.get("failures"))
    apply_count = _count(failed, len(applied))
    both = sum(1 for key in dict.fromkeys(applied) if key in derived)
    jobs = tuple({**derived, **dict.fromkeys(applied)})
    count = derive_count + apply_count - both
    return CycleSummary(outcome, tuple(failed_shards), jobs, None if count == len(jobs) else count)


def cycle_metrics(summary: CycleSummary, duration_ms: float) -> list[MetricPoint]:
    """CycleDurationMs, CyclesSucceeded (clean cycles only) or CyclesFailed, FailedShards and FailedJobs.

    FailedShards and FailedJobs are published as 0 too, so a graph shows a healthy cycle rather than a gap, and
    an alarm's missing data means "no cycle finished" (the staleness alarm's case), never "nothing failed".
    """
    clean = summary.clean
    return [
        MetricPoint(CYCLE_DURATION_METRIC, "Milliseconds", (round(duration_ms, 1),)),
        MetricPoint(CYCLES_SUCCEEDED_METRIC if clean else CYCLES_FAILED_METRIC, "Count", (1.0,)),
        MetricPoint(FAILED_SHARDS_METRIC, "Count", (float(len(summary.failed_shards)),)),
        MetricPoint(FAILED_JOBS_METRIC, "Count", (float(summary.jobs_failed),)),
    ]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _keys(failures: Any) -> list[str]:
    return [str(_mapping(failure).get("key", "")) for failure in _list(failures)]


def _count(value: Any, named: int) -> int:
    # A count the step reported, else (older shape) the length of its list; never fewer than it named.
    return max(value, named) if isinstance(value, int) and not isinstance(value, bool) else named


def _shard(value: Any) -> int | None:
    # Shard numbers are ints; anything else (None: the whole registry in one shard) is kept as None.
    return value if isinstance(value, int) and not isinstance(value, bool) else None
