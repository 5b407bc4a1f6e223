"""The derive step of a cycle, for one shard: collect what its jobs' policies read, derive every job within the
Lambda's time, record each decision that changes something, report counts.

The engine runs for every job, in parallel, each decision that changes something (a new priority
or reason, :func:`osprey_control.registry.model.decision_changes`) written conditionally; the others write
nothing.

One job's failure (unknown policy, a write conflict, a broken store) is recorded in its :class:`JobOutcome`
and never stops the rest of the shard. Custom rule failures never fail a job at all: the engine falls back.

Liveness: jobs run in per-rule bulkheads (:mod:`osprey_control.custom_rules.bulkhead`), so a hung custom rule delays
only its own jobs, and a job starts only if its worst case (the sum of its policy's custom rule timeouts) ends
before the deadline's margin. Each decision is written as soon as it is made; the jobs not started are
``deferred``: untouched in the registry, derived by the next cycle.

Fencing: with a ``fence`` (the execution's lease token), each decision's transaction also checks the token.
The first :class:`FenceLostError` stops the shard's writes: no job starts after it and the jobs in flight write
nothing (``ShardResult.fence_lost``), since another execution now holds the lease and derives these jobs.

The report (:class:`~osprey_control.steps.payload.ShardReport`) adds ``deferred``: the jobs not started before
the deadline's margin, left as they were in the registry for the next cycle, and ``fence_lost``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from osprey_control.custom_rules import run_in_lanes
from osprey_control.derivation import (
    INPUTS_KEY,
    CustomRuleInvoker,
    Decision,
    JobMetrics,
    PolicyLookup,
    derive,
    summarize_inputs,
)
from osprey_control.metrics import CollectionResult, collect, needs_from_policies
from osprey_control.policy import InvalidPolicy, InvalidPolicyError
from osprey_control.registry import (
    Fence,
    FenceLostError,
    JobKey,
    JobRecord,
    VersionConflictError,
    decision_changes,
)
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.payload import ShardReport
from osprey_control.steps.policy_health import invalid_policies, invalid_policy_metrics, invalid_policy_output
from osprey_control.telemetry import MetricPoint, shard_metrics
from osprey_control.wiring import COLLECTION_LATENCY_METRIC

__all__ = [
    "ActiveJobs",
    "DecisionStore",
    "DeriveRun",
    "JobOutcome",
    "ShardResult",
    "derive_shard",
    "derive_within",
]

# Concurrent calls per custom rule function (per shard): enough to overlap a fast rule's latency, few enough
# that a hung rule holds only these.
DEFAULT_RULE_SLOTS = 4


class DecisionStore(Protocol):
    """Where decisions go: the registry. ``record_decision`` must be conditional on ``expected_version`` (and
    on ``fence``, when given: :class:`FenceLostError` if it no longer holds) and returns the record as written (the
    registry) or None (a store that does not say)."""

    def record_decision(
        self,
        key: JobKey,
        decision: dict[str, Any],
        derived_priority: int,
        expected_version: int,
        now: datetime,
        *,
        fence: Fence | None = None,
    ) -> Any: ...


@dataclass(frozen=True)
class JobOutcome:
    record: JobRecord  # as read at the start of the cycle
    decision: Decision | None = None
    error: str | None = None  # why this job has no decision written
    error_kind: str | None = (
        None  # unknown-policy | invalid-policy | conflict | store-error | engine-error | fence-lost
    )
    recorded: JobRecord | None = None  # the record as the decision left it, when it was written

    @property
    def changed(self) -> bool:
        """The derived priority moved this cycle."""
        return self.error is None and self.decision is not None and self.decision.changed

    @property
    def current(self) -> JobRecord:
        """What the registry holds after this cycle's derivation."""
        if self.recorded is not None:
            return self.recorded
        if self.error is None and self.decision is not None:  # written by a store that returns nothing
            return self.record.model_copy(update={"derived_priority": self.decision.priority})
        return self.record

    @property
    def apply_pending(self) -> bool:
        """The derived priority is not on the backend yet and is worth (re)trying: the apply step's work."""
        return self.current.apply_pending()


@dataclass
class ShardResult:
    outcomes: list[JobOutcome] = field(default_factory=list)
    custom_rule_failures: Counter[str] = field(default_factory=Counter)  # reason -> count
    # Jobs not started before the deadline: nothing was written for them; the next cycle derives them.
    deferred: list[JobRecord] = field(default_factory=list)
    # Another execution took the lease during this shard: its decisions since then were not written.
    fence_lost: bool = False

    @property
    def changes(self) -> list[JobOutcome]:
        """Jobs whose derived priority changed this cycle."""
        return [outcome for outcome in self.outcomes if outcome.changed]

    @property
    def pending(self) -> list[JobOutcome]:
        """Jobs whose derived priority differs from the applied one and is due (new, or a transient failure
        under the retry limit): what the apply step must write. Includes jobs derived in earlier cycles."""
        return [outcome for outcome in self.outcomes if outcome.apply_pending]

    @property
    def failures(self) -> list[JobOutcome]:
        return [outcome for outcome in self.outcomes if outcome.error is not None]


def _previous(record: JobRecord) -> int | None:
    """docs/design.md §4's ``prev``: the last priority the derivation produced (its damped "applied" value), which is
    ``derived_priority``, not what the backend holds: damping steps from the last decision even while an apply
    is failing, so a backend outage never makes the derivation repeat or skip steps.

    ``applied_priority`` stands in for records derived before the two were split; then a job's own
    ``initial_priority`` (its osprey block) beats the policy's ``initialPriority`` (docs/design.md §5).
    """
    for value in (record.derived_priority, record.applied_priority, record.block.initial_priority):
        if value is not None:
            return value
    return None


def _derive_one(
    record: JobRecord,
    *,
    metrics: Mapping[JobKey, JobMetrics],
    policies: PolicyLookup,
    store: DecisionStore,
    invoker: CustomRuleInvoker | None,
    now: datetime,
    fence: Fence | None = None,
    lost: threading.Event | None = None,
) -> JobOutcome:
    try:
        policy = policies.get(record.policy)
    except LookupError as error:  # not deployed, or invalid with no good version: the job keeps its priority
        kind = "invalid-policy" if isinstance(error, InvalidPolicyError) else "unknown-policy"
        return JobOutcome(record, error=str(error), error_kind=kind)
    job = metrics.get(record.key) or JobMetrics(
        job_id=str(record.key), backend=record.backend.value, name=record.name
    )
    try:
        decision = derive(policy, job, _previous(record), invoker)
    except Exception as error:  # the engine does not raise on data; this guards against the unforeseen
        return JobOutcome(record, error=f"{type(error).__name__}: {error}", error_kind="engine-error")
    if not record.apply_pending() and not decision_changes(
        record, {"reason": decision.reason}, decision.priority
    ):
        # The registry already holds this priority for this reason and has nothing to apply: no write, and no
        # read either (a steady fleet costs no DynamoDB per job). A pending job still goes to the store, which
        # writes only if the item's apply-pending entry is missing.
        return JobOutcome(record, decision, recorded=record)
    if fence is not None and lost is not None and lost.is_set():  # in flight when the fence failed: no write
        return JobOutcome(record, decision, error=str(FenceLostError(fence.token)), error_kind="fence-lost")
    try:
        # The inputs go with the decision, so the history can be re-derived under another policy (replay).
        explained = {**decision.to_dict(), INPUTS_KEY: summarize_inputs(job)}
        written = store.record_decision(
            record.key, explained, decision.priority, record.version, now, fence=fence
        )
    except FenceLostError as error:
        if lost is not None:
            lost.set()
        return JobOutcome(record, decision, error=str(error), error_kind="fence-lost")
    except Exception as error:
        # A conflict is the registry saying the job changed since it was read: the next cycle derives it again.
        kind = "conflict" if isinstance(error, VersionConflictError) else "store-error"
        return JobOutcome(record, decision, error=f"{type(error).__name__}: {error}", error_kind=kind)
    return JobOutcome(record, decision, recorded=written if isinstance(written, JobRecord) else None)


def _rules(record: JobRecord, policies: PolicyLookup) -> tuple[frozenset[str], float]:
    """The custom rule functions the job's policy calls, and their worst case (ms): the engine calls them
    one after the other, each bounded by its ``timeoutMs``. An unknown policy calls none."""
    try:
        policy = policies.get(record.policy)
    except LookupError:
        return frozenset(), 0.0
    customs = (*policy.weighted_customs, *policy.stages)
    return frozenset(rule.arn for rule in customs), float(sum(rule.timeout_ms for rule in customs))


def _rotated(records: Sequence[JobRecord], now: datetime) -> list[JobRecord]:
    """The shard's jobs starting at an offset that moves every minute, so the jobs a deadline defers are not
    always the same ones at the end of the registry's order."""
    offset = int(now.timestamp() // 60) % len(records)
    return [*records[offset:], *records[:offset]]


def derive_shard(
    records: Sequence[JobRecord],
    metrics: Mapping[JobKey, JobMetrics],
    policies: PolicyLookup,
    store: DecisionStore,
    invoker: CustomRuleInvoker | None,
    *,
    now: datetime,
    max_workers: int = 8,
    rule_slots: int = DEFAULT_RULE_SLOTS,
    deadline: Deadline | None = None,
    fence: Fence | None = None,
) -> ShardResult:
    """Derive and record the jobs of the shard until ``deadline`` (none: all of them), or until ``fence``
    fails (the jobs not started then are ``deferred``).

    Jobs without custom rules share ``max_workers`` slots; each custom rule function has ``rule_slots``.
    """
    result = ShardResult()
    if not records:
        return result
    deadline = deadline or Deadline.never()
    ordered = _rotated(records, now)
    rules = {record.key: _rules(record, policies) for record in ordered}
    lost = threading.Event()  # set by the first FenceLostError: the shard's remaining jobs write nothing
    done, deferred = run_in_lanes(
        ordered,
        lambda record: rules[record.key][0],
        partial(
            _derive_one,
            metrics=metrics,
            policies=policies,
            store=store,
            invoker=invoker,
            now=now,
            fence=fence,
            lost=lost,
        ),
        slots_per_lane=rule_slots,
        shared_slots=max_workers,
        may_start=lambda record: not lost.is_set() and deadline.allows(rules[record.key][1]),
    )
    result.deferred = [ordered[index] for index in deferred]
    result.fence_lost = lost.is_set()
    position = {record.key: index for index, record in enumerate(records)}
    for outcome in sorted(done.values(), key=lambda outcome: position[outcome.record.key]):
        result.outcomes.append(outcome)
        if outcome.decision is not None:
            for rule in outcome.decision.rules:
                if rule.outcome.startswith("fallback:"):
                    result.custom_rule_failures[rule.outcome.removeprefix("fallback:")] += 1
    return result


class ActiveJobs(DecisionStore, Protocol):
    def list_active(self, shard: int | None = None) -> list[JobRecord]: ...


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


@dataclass
class DeriveRun:
    report: ShardReport
    deferred: list[JobRecord] = field(default_factory=list)
    fence_lost: bool = False
    # Deployed policies whose stored value is refused (osprey_control.steps.policy_health).
    invalid_policies: dict[str, InvalidPolicy] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The state machine's view: the shard report's counts and how many jobs wait for the next cycle;
        ``fenceLost`` and ``invalidPolicyCount`` only when there are, so a normal shard's output is as it was."""
        answer = {
            **self.report.to_dict(),
            "deferred": len(self.deferred),
            **invalid_policy_output(self.invalid_policies, detailed=False),
        }
        if self.fence_lost:
            answer["fenceLost"] = True
        return answer


def derive_within(
    registry: ActiveJobs,
    policies: PolicyLookup,
    invoker: CustomRuleInvoker | None,
    deadline: Deadline | None = None,
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

    ``prior``: this shard's part of the cycle's collection (:mod:`osprey_control.steps.collect`); only the jobs
    it lacks (registered since) are read here."""
    now = now or datetime.now(UTC)
    deadline = deadline or Deadline.never()
    records = registry.list_active(shard)
    started = time.perf_counter()
    collected = _collected(records, prior, policies, cloudwatch, now)
    collection_ms = (time.perf_counter() - started) * 1000
    derived = derive_shard(
        records, collected.metrics, policies, registry, invoker, now=now, deadline=deadline, fence=fence
    )
    report = _report(shard, collected, derived)
    invalid = invalid_policies(policies)
    report.metrics = [
        *invalid_policy_metrics(invalid),
        *shard_metrics(derived, per_job=per_job_metrics),
        MetricPoint(COLLECTION_LATENCY_METRIC, "Milliseconds", (collection_ms,)),
        MetricPoint("JobsDeferred", "Count", (float(len(derived.deferred)),), {"Step": "derive"}),
    ]
    return DeriveRun(report, derived.deferred, derived.fence_lost, invalid)


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
