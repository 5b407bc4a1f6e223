"""Derive a shard: the engine for every job, in parallel, each decision written conditionally.

One job's failure (unknown policy, a write conflict, a broken store) is recorded in its :class:`JobOutcome`
and never stops the rest of the shard. Custom rule failures never fail a job at all: the engine falls back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Protocol

from osprey_control.derivation import CompiledPolicy, CustomRuleInvoker, Decision, JobMetrics, derive
from osprey_control.registry import JobKey, JobRecord

__all__ = ["DecisionStore", "JobOutcome", "PolicyLookup", "ShardResult", "derive_shard"]


class DecisionStore(Protocol):
    """Where decisions go: the registry. ``record_decision`` must be conditional on ``expected_version`` and
    returns the record as written (the registry) or None (a store that does not say)."""

    def record_decision(
        self,
        key: JobKey,
        decision: dict[str, Any],
        derived_priority: int,
        expected_version: int,
        now: datetime,
    ) -> Any: ...


class PolicyLookup(Protocol):
    def get(self, name: str) -> CompiledPolicy: ...


@dataclass(frozen=True)
class JobOutcome:
    record: JobRecord  # as read at the start of the cycle
    decision: Decision | None = None
    error: str | None = None  # why this job has no decision written
    error_kind: str | None = None  # unknown-policy | conflict | store-error | engine-error
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
    """DESIGN §4's ``prev``: the last priority the derivation produced (its damped "applied" value), which is
    ``derived_priority``, not what the backend holds: damping steps from the last decision even while an apply
    is failing, so a backend outage never makes the derivation repeat or skip steps.

    ``applied_priority`` stands in for records derived before the two were split; then a job's own
    ``initial_priority`` (its osprey block) beats the policy's ``initialPriority`` (DESIGN §5).
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
) -> JobOutcome:
    try:
        policy = policies.get(record.policy)
    except LookupError as error:
        return JobOutcome(record, error=str(error), error_kind="unknown-policy")
    job = metrics.get(record.key) or JobMetrics(
        job_id=str(record.key), backend=record.backend.value, name=record.name
    )
    try:
        decision = derive(policy, job, _previous(record), invoker)
    except Exception as error:  # the engine does not raise on data; this guards against the unforeseen
        return JobOutcome(record, error=f"{type(error).__name__}: {error}", error_kind="engine-error")
    try:
        written = store.record_decision(
            record.key, decision.to_dict(), decision.priority, record.version, now
        )
    except Exception as error:
        kind = "conflict" if "Conflict" in type(error).__name__ else "store-error"
        return JobOutcome(record, decision, error=f"{type(error).__name__}: {error}", error_kind=kind)
    return JobOutcome(record, decision, recorded=written if isinstance(written, JobRecord) else None)


def derive_shard(
    records: Sequence[JobRecord],
    metrics: Mapping[JobKey, JobMetrics],
    policies: PolicyLookup,
    store: DecisionStore,
    invoker: CustomRuleInvoker | None,
    *,
    now: datetime,
    max_workers: int = 8,
) -> ShardResult:
    """Derive and record every job of the shard. Jobs run concurrently so their custom rules overlap."""
    result = ShardResult()
    if not records:
        return result
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(records)))) as pool:
        outcomes = list(
            pool.map(
                partial(
                    _derive_one, metrics=metrics, policies=policies, store=store, invoker=invoker, now=now
                ),
                records,
            )
        )
    for outcome in outcomes:
        result.outcomes.append(outcome)
        if outcome.decision is not None:
            for rule in outcome.decision.rules:
                if rule.outcome.startswith("fallback:"):
                    result.custom_rule_failures[rule.outcome.removeprefix("fallback:")] += 1
    return result
