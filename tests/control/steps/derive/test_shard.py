"""Given a shard of registered jobs with their metrics, when the derive step runs, then every job gets a
decision written conditionally, custom rule failures fall back and are counted, and one job's failure never
stops the others."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from osprey_control.contract import parse_block
from osprey_control.derivation import (
    CustomRuleCall,
    CustomRuleError,
    FailureReason,
    JobMetrics,
    NodeMetrics,
    compile_policy,
)
from osprey_control.policy import load_policies
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus
from osprey_control.registry.dynamodb import VersionConflictError
from osprey_control.registry.fence import Fence
from osprey_control.steps.derive import derive_shard
from tests.conftest import REPO_ROOT

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
POLICIES = {
    p.name: compile_policy(p)
    for p in load_policies([REPO_ROOT / "policies", REPO_ROOT / "policies" / "examples"])
}
BUSY = {"gpu_utilization": 95.0, "memory_bandwidth_utilization": 70.0, "node_interconnect_latency": 120.0}


class Policies:
    def get(self, name: str) -> Any:
        if name not in POLICIES:
            raise LookupError(f"policy {name!r} is not deployed")
        return POLICIES[name]


class MemoryStore:
    """Stands in for the registry: conditional on the version, like DynamoDB's ConditionExpression."""

    def __init__(self, versions: dict[JobKey, int]) -> None:
        self.versions = dict(versions)
        self.written: dict[JobKey, tuple[dict[str, Any], int]] = {}
        self.broken: set[JobKey] = set()
        self._lock = threading.Lock()

    def record_decision(
        self,
        key: JobKey,
        decision: dict[str, Any],
        derived_priority: int,
        expected_version: int,
        now: datetime,
        *,
        fence: Fence | None = None,
    ) -> None:
        with self._lock:
            if key in self.broken:
                raise RuntimeError("ProvisionedThroughputExceededException after retries")
            if self.versions.get(key, 0) != expected_version:
                raise VersionConflictError(key, expected_version, self.versions.get(key))
            self.versions[key] = expected_version + 1
            self.written[key] = (decision, derived_priority)


def record(
    name: str,
    policy: str = "training-policy",
    applied: int | None = 50,
    derived: int | None = None,
    **block: Any,
) -> JobRecord:
    return JobRecord(
        backend=Backend.SAGEMAKER,
        native_id=name,
        name=name,
        block=parse_block({"priority_derivation_profile": policy, **block}),
        status=JobStatus.RUNNING,
        status_time=NOW,
        derived_priority=derived,
        applied_priority=applied,
        version=3,
    )


def metrics_for(*records: JobRecord) -> dict[JobKey, JobMetrics]:
    return {
        r.key: JobMetrics(str(r.key), (NodeMetrics("algo-1", BUSY),), backend="sagemaker") for r in records
    }


def test_every_job_gets_a_decision_written_conditionally() -> None:
    jobs = [record(f"job-{i}") for i in range(20)]
    store = MemoryStore({job.key: 3 for job in jobs})
    result = derive_shard(jobs, metrics_for(*jobs), Policies(), store, None, now=NOW)
    assert result.failures == []
    assert len(result.changes) == 20
    decision, applied = store.written[jobs[0].key]
    assert (decision["previous"], applied, decision["reason"]) == (50, 60, "damped")
    assert store.versions[jobs[0].key] == 4


def test_job_without_metrics_holds_its_priority() -> None:
    job = record("quiet", applied=42)
    store = MemoryStore({job.key: 3})
    result = derive_shard([job], {}, Policies(), store, None, now=NOW)
    assert store.written[job.key][1] == 42
    assert result.outcomes[0].decision is not None
    assert result.outcomes[0].decision.reason == "no-data"
    assert result.changes == []


def test_damping_steps_from_the_derived_priority_not_the_applied_one() -> None:
    # Given a job derived to 60 whose apply has not reached the backend (still at 50)
    job = record("lagging", applied=50, derived=60)
    store = MemoryStore({job.key: 3})
    # When it is derived again with busy GPUs
    result = derive_shard([job], metrics_for(job), Policies(), store, None, now=NOW)
    # Then it moves one more step from 60 (DESIGN §4's prev is the last derived value), and stays pending
    decision, derived = store.written[job.key]
    assert (decision["previous"], derived) == (60, 70)
    assert [outcome.current.derived_priority for outcome in result.pending] == [70]


def test_a_job_derived_at_its_applied_priority_is_not_pending() -> None:
    job = record("settled", applied=42, derived=42)
    result = derive_shard([job], {}, Policies(), MemoryStore({job.key: 3}), None, now=NOW)
    assert result.pending == []


def test_the_jobs_own_initial_priority_beats_the_policys() -> None:
    job = record("fresh", applied=None, initial_priority=90)
    store = MemoryStore({job.key: 3})
    derive_shard([job], metrics_for(job), Policies(), store, None, now=NOW)
    assert store.written[job.key][0]["previous"] == 90


def test_failures_are_isolated_to_their_job() -> None:
    # Given one job with an undeployed policy, one whose registry item changed, one the store cannot write
    ok, unknown, stale, broken = record("ok"), record("u", policy="ghost"), record("stale"), record("broken")
    store = MemoryStore({ok.key: 3, stale.key: 4, broken.key: 3})
    store.broken.add(broken.key)
    # When the shard is derived
    result = derive_shard(
        [ok, unknown, stale, broken],
        metrics_for(ok, unknown, stale, broken),
        Policies(),
        store,
        None,
        now=NOW,
    )
    # Then the healthy job is written and each failure says why
    kinds = {outcome.record.native_id: outcome.error_kind for outcome in result.outcomes}
    assert kinds == {"ok": None, "u": "unknown-policy", "stale": "conflict", "broken": "store-error"}
    assert list(store.written) == [ok.key]
    assert [outcome.record.native_id for outcome in result.changes] == ["ok"]


class FlakyRules:
    """Custom rules answering per function name; counts concurrent calls."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def invoke(self, call: CustomRuleCall) -> Any:
        with self._lock:
            self.calls += 1
        if call.event["job"]["id"].endswith("slow"):
            raise CustomRuleError(FailureReason.TIMEOUT, "no answer within 800 ms")
        if call.event["job"]["id"].endswith("garbage"):
            return "<html>502</html>"
        return {"derived_priority": 35}


def test_custom_rule_failures_fall_back_and_are_counted_by_reason() -> None:
    jobs = [record(n, policy="spot-aware-policy") for n in ("a", "b-slow", "c-garbage", "d-slow")]
    store = MemoryStore({job.key: 3 for job in jobs})
    rules = FlakyRules()
    result = derive_shard(jobs, metrics_for(*jobs), Policies(), store, rules, now=NOW)
    assert result.failures == []
    assert rules.calls == 4
    assert result.custom_rule_failures == {"timeout": 2, "unparsable": 1}
    priorities = {key.native_id: applied for key, (_, applied) in store.written.items()}
    assert priorities["a"] == 40  # answered 35, damped from 50 by at most 10
    assert priorities["b-slow"] == 40  # the spot policy's fallbackPriority is 40


def test_a_decision_that_changes_nothing_for_an_applied_job_is_not_sent_to_the_store() -> None:
    # Given a job without metrics, derived and applied at 50 for want of data, and a pending one the same
    waiting: dict[str, Any] = {
        "priority": 50,
        "previous": 50,
        "target": None,
        "base": None,
        "reason": "no-data",
        "rules": [],
    }
    steady = record("steady", applied=50, derived=50).model_copy(update={"last_decision": waiting})
    pending = record("pending", applied=40, derived=50).model_copy(update={"last_decision": waiting})
    store = MemoryStore({steady.key: 3, pending.key: 3})

    # When the shard derives them again, still without data
    result = derive_shard([steady, pending], {}, Policies(), store, None, now=NOW)

    # Then both decisions are the same as before, the applied job's is not even read or written (a steady fleet
    # costs no DynamoDB per job), and the pending one goes to the store (which writes only what changed)
    assert [outcome.decision.reason for outcome in result.outcomes if outcome.decision] == ["no-data"] * 2
    assert list(store.written) == [pending.key]
    assert result.failures == []
