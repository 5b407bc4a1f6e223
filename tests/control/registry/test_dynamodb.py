"""Given the registry table on moto, when jobs are observed, decided on and hit by spot warnings, then what an
operator reads back (active jobs, versions, history, spot risk) is right and stale writers write nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from osprey_control.registry import Backend, JobKey, JobStatus
from osprey_control.registry.dynamodb import JobNotFoundError, JobRegistry, VersionConflictError
from tests.control.registry.conftest import T0, TABLE, observation

KEY = JobKey(Backend.BATCH, "llama-pretrain")
DECISION = {"priority": 60, "previous": 50, "target": 71.3, "base": 71.3, "reason": "damped", "rules": []}


def _items(dynamodb: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = dynamodb.scan(TableName=TABLE)["Items"]
    return items


def test_first_observation_registers_the_job_at_version_1(registry: JobRegistry) -> None:
    # Given an empty registry, when a RUNNING event is applied
    result = registry.apply_observation(observation())
    # Then the job is stored, readable, active and at version 1
    record = registry.get(KEY)
    assert result.changed
    assert record is not None
    assert (record.status, record.version, record.policy, record.active) == (
        JobStatus.RUNNING,
        1,
        "training-policy",
        True,
    )


def test_duplicate_observation_writes_nothing(registry: JobRegistry) -> None:
    registry.apply_observation(observation(instances=("i-0abc",)))
    # When the same event is delivered again
    result = registry.apply_observation(observation(instances=("i-0abc",)))
    # Then nothing changed, not even the version
    assert not result.changed
    assert registry.get(KEY).version == 1  # type: ignore[union-attr]


def test_late_older_event_does_not_move_the_status_back(registry: JobRegistry) -> None:
    registry.apply_observation(observation(status=JobStatus.RUNNING, at=T0 + timedelta(minutes=5)))
    # When a PENDING event from before arrives late
    registry.apply_observation(observation(status=JobStatus.PENDING, at=T0))
    # Then the job is still RUNNING since the RUNNING event
    record = registry.get(KEY)
    assert record is not None
    assert (record.status, record.status_time) == (JobStatus.RUNNING, T0 + timedelta(minutes=5))


def test_sparse_index_holds_only_active_jobs(registry: JobRegistry) -> None:
    # Given three active jobs
    for name in ("a", "b", "c"):
        registry.apply_observation(observation(name, JobStatus.RUNNING))
    assert {record.native_id for record in registry.list_active()} == {"a", "b", "c"}
    # When one succeeds
    registry.apply_observation(observation("b", JobStatus.SUCCEEDED, at=T0 + timedelta(hours=1)))
    # Then it leaves the active list, but stays readable
    assert {record.native_id for record in registry.list_active()} == {"a", "c"}
    assert registry.get(JobKey(Backend.BATCH, "b")).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]


def test_list_active_by_shard_partitions_the_jobs(registry: JobRegistry) -> None:
    names = [f"job-{number}" for number in range(12)]
    for name in names:
        registry.apply_observation(observation(name))
    # When each shard is listed on its own
    per_shard = [registry.list_active(shard) for shard in range(registry.shards)]
    # Then every job is in exactly the shard its key hashes to
    listed = [record.native_id for records in per_shard for record in records]
    assert sorted(listed) == sorted(names)
    for shard, records in enumerate(per_shard):
        assert all(registry.shard_of(record.key) == shard for record in records)


def test_list_active_uses_query_never_scan(registry: JobRegistry, dynamodb: Any) -> None:
    registry.apply_observation(observation())
    calls: list[str] = []
    dynamodb.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    registry.list_active()
    assert set(calls) == {"Query"}
    assert len(calls) == registry.shards


def test_record_decision_writes_priority_and_history_with_ttl(registry: JobRegistry) -> None:
    registry.apply_observation(observation())
    now = T0 + timedelta(minutes=1)
    # When a decision is recorded against the version read
    record = registry.record_decision(KEY, DECISION, 60, expected_version=1, now=now)
    # Then the job carries it as derived (not applied: only the apply step says what reached the backend)
    # at the next version, and one history item expires after 14 days
    stored = registry.get(KEY)
    assert stored == record
    assert (stored.derived_priority, stored.version, stored.last_changed_at) == (60, 2, now)
    assert (stored.applied_priority, stored.applied_at) == (None, None)
    assert stored.last_decision == DECISION
    (entry,) = registry.history(KEY)
    assert (entry["derived_priority"], entry["version"]) == (60, 2)
    assert entry["ttl"] == int((now + timedelta(days=14)).timestamp())  # epoch seconds, not milliseconds


def test_history_retention_is_configurable(dynamodb: Any) -> None:
    registry = JobRegistry(TABLE, dynamodb, history_retention=timedelta(days=2))
    registry.create_table()
    registry.apply_observation(observation())
    registry.record_decision(KEY, DECISION, 60, expected_version=1, now=T0)
    assert registry.history(KEY)[0]["ttl"] == int((T0 + timedelta(days=2)).timestamp())


def test_a_decision_that_changes_nothing_writes_nothing(registry: JobRegistry, dynamodb: Any) -> None:
    # Given a job derived to 60 (damped)
    registry.apply_observation(observation())
    registry.record_decision(KEY, DECISION, 60, expected_version=1, now=T0)
    before = _items(dynamodb)
    writes: list[str] = []
    dynamodb.meta.events.register("before-call.dynamodb.TransactWriteItems", lambda **_: writes.append("w"))
    # When the next cycle derives the same priority for the same reason (other metric values)
    later = T0 + timedelta(minutes=1)
    record = registry.record_decision(KEY, {**DECISION, "target": 72.0}, 60, expected_version=2, now=later)
    # Then nothing is written: the item, its version and the history are as they were
    assert writes == []
    assert _items(dynamodb) == before
    assert (record.version, record.last_decision) == (2, DECISION)


def test_a_new_reason_is_written_and_an_unchanged_priority_keeps_last_changed_at(
    registry: JobRegistry,
) -> None:
    registry.apply_observation(observation())
    registry.record_decision(KEY, DECISION, 60, expected_version=1, now=T0)
    # When the same priority is derived for another reason (the target came within the deadband)
    deadband = {**DECISION, "reason": "deadband"}
    record = registry.record_decision(KEY, deadband, 60, expected_version=2, now=T0 + timedelta(minutes=1))
    # Then it is written (the explanation changed) but the priority's last change is still the first one
    assert (record.version, record.last_changed_at, record.last_decision) == (3, T0, deadband)
    assert len(registry.history(KEY)) == 2


def test_the_apply_pending_index_holds_exactly_the_jobs_to_apply(registry: JobRegistry) -> None:
    # Given a job derived to 60 and not applied yet
    registry.apply_observation(observation())
    registry.record_decision(KEY, DECISION, 60, expected_version=1, now=T0)
    # Then it is in its shard's apply-pending entries ...
    assert registry.pending_keys() == [KEY]
    assert registry.pending_keys(registry.shard_of(KEY)) == [KEY]
    # ... until the apply step records 60 on the backend, which removes it in the same write
    registry.record_applied(KEY, 60, T0)
    assert registry.pending_keys() == []
    # ... and a permanent failure of a new priority keeps it out (it waits for the next change)
    record = registry.record_decision(KEY, {**DECISION, "priority": 70}, 70, 3, T0)
    assert registry.pending_keys() == [KEY]
    registry.record_apply_failure(KEY, 70, "failed: AccessDenied", permanent=True, now=T0)
    assert registry.pending_keys() == []
    assert record.apply_pending()


def test_a_pending_item_written_before_the_index_gets_its_entry_from_the_next_decision(
    registry: JobRegistry, dynamodb: Any
) -> None:
    # Given a pending job whose item predates the apply-pending index (no apply_pending_shard attribute)
    registry.apply_observation(observation())
    registry.record_decision(KEY, DECISION, 60, expected_version=1, now=T0)
    dynamodb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "JOB#batch#llama-pretrain"}, "sk": {"S": "META"}},
        UpdateExpression="REMOVE apply_pending_shard",
    )
    assert registry.pending_keys() == []
    # When the next cycle derives the same decision
    registry.record_decision(KEY, DECISION, 60, expected_version=2, now=T0 + timedelta(minutes=1))
    # Then that one write puts it in the index
    assert registry.pending_keys() == [KEY]


def test_stale_version_raises_and_writes_nothing(registry: JobRegistry, dynamodb: Any) -> None:
    registry.apply_observation(observation())
    registry.record_decision(KEY, DECISION, 60, expected_version=1, now=T0)
    before = _items(dynamodb)
    # When a second deriver writes with the version it read before the first one wrote
    with pytest.raises(VersionConflictError, match=r"expected at version 1 but it is now at version 2"):
        registry.record_decision(KEY, {**DECISION, "priority": 70}, 70, expected_version=1, now=T0)
    # Then the table is exactly as it was
    assert _items(dynamodb) == before


def test_conflict_between_read_and_write_is_caught_by_the_condition(
    registry: JobRegistry, dynamodb: Any
) -> None:
    registry.apply_observation(observation())
    # Given an event lands after record_decision read the job but before its transaction
    original_get = registry._get_item

    def get_then_race(key: JobKey) -> Any:
        item = original_get(key)
        registry._get_item = original_get  # type: ignore[method-assign]
        registry.apply_observation(observation(instances=("i-0race",)))
        return item

    registry._get_item = get_then_race  # type: ignore[method-assign]
    before_history = registry.history(KEY)
    # Then the conditional transaction refuses, and no history item is written either
    with pytest.raises(VersionConflictError):
        registry.record_decision(KEY, DECISION, 60, expected_version=1, now=T0)
    assert registry.history(KEY) == before_history == []
    stored = registry.get(KEY)
    assert stored is not None
    assert stored.applied_priority is None


def test_record_decision_for_unknown_job_says_how_jobs_get_registered(registry: JobRegistry) -> None:
    with pytest.raises(JobNotFoundError, match="first state-change event"):
        registry.record_decision(KEY, DECISION, 60, expected_version=0, now=T0)


def test_spot_warning_reaches_the_job_on_the_instance(registry: JobRegistry) -> None:
    registry.apply_observation(observation(instances=("i-0abc", "i-0def")))
    registry.apply_observation(observation("other", instances=("i-0xyz",)))
    # When the instance gets a rebalance recommendation, then an interruption warning
    assert registry.mark_spot_risk("i-0abc", 0.5, T0) == [KEY]
    assert registry.mark_spot_risk("i-0abc", 1.0, T0 + timedelta(seconds=30)) == [KEY]
    # Then only that job's instance carries the risk, and a late rebalance does not lower it
    assert registry.mark_spot_risk("i-0abc", 0.5, T0 + timedelta(seconds=60)) == []
    assert registry.get(KEY).spot_risk == {"i-0abc": 1.0}  # type: ignore[union-attr]
    assert registry.get(JobKey(Backend.BATCH, "other")).spot_risk == {}  # type: ignore[union-attr]


def test_spot_warning_before_the_job_knows_its_instance_is_kept(registry: JobRegistry) -> None:
    # Given the warning arrives first
    assert registry.mark_spot_risk("i-0early", 1.0, T0) == []
    # When the job's event that names the instance arrives
    registry.apply_observation(observation(instances=("i-0early",)))
    # Then the job has the risk anyway
    assert registry.get(KEY).spot_risk == {"i-0early": 1.0}  # type: ignore[union-attr]


def test_out_of_range_risk_is_refused(registry: JobRegistry) -> None:
    with pytest.raises(ValueError, match=r"within \[0, 1\]"):
        registry.mark_spot_risk("i-0abc", 1.5, T0)


def test_record_applied_keeps_the_decision_and_survives_a_concurrent_ingest(
    registry: JobRegistry, dynamodb: Any
) -> None:
    # Given a job derived to 60
    registry.apply_observation(observation())
    registry.record_decision(KEY, DECISION, 60, expected_version=1, now=T0)
    # ... and an event for it landing between the apply step's read and its write
    raced: list[bool] = []

    def ingest_first(**_: Any) -> None:
        if not raced:
            raced.append(True)
            registry.apply_observation(observation(instances=("i-0new",), at=T0 + timedelta(minutes=1)))

    dynamodb.meta.events.register("before-call.dynamodb.PutItem", ingest_first)
    # When the apply step records that the backend now holds 60
    record = registry.record_applied(KEY, 60, T0 + timedelta(minutes=2))
    # Then its conditional write lost once, re-read, and kept both the event's node and the decision
    stored = registry.get(KEY)
    assert stored == record
    assert stored is not None
    assert (stored.derived_priority, stored.applied_priority) == (60, 60)
    assert stored.applied_at == T0 + timedelta(minutes=2)
    assert [node.node_id for node in stored.nodes] == ["i-0new"]
    assert stored.last_decision == DECISION
    assert stored.version == 4  # registered, decided, the event, applied


def test_transient_apply_failures_count_up_and_a_permanent_one_parks_the_priority(
    registry: JobRegistry,
) -> None:
    registry.apply_observation(observation())
    registry.record_decision(KEY, DECISION, 60, expected_version=1, now=T0)
    for _ in range(2):
        registry.record_apply_failure(KEY, 60, "failed: Throttling", permanent=False, now=T0)
    record = registry.get(KEY)
    assert record is not None
    assert record.apply_failure is not None
    assert (record.apply_failure.attempts, record.apply_pending()) == (2, True)
    registry.record_apply_failure(KEY, 60, "failed: AccessDenied", permanent=True, now=T0)
    parked = registry.get(KEY)
    assert parked is not None
    assert parked.apply_failure is not None
    assert (parked.apply_failure.permanent, parked.apply_pending()) == (True, False)
    # ... until a new derived priority, which is always tried
    moved = registry.record_decision(KEY, {**DECISION, "priority": 70}, 70, parked.version, T0)
    assert moved.apply_pending()


def test_recording_an_apply_for_a_job_that_left_the_registry_writes_nothing(registry: JobRegistry) -> None:
    assert registry.record_applied(KEY, 60, T0) is None
    assert registry.record_apply_failure(KEY, 60, "gone", permanent=True, now=T0) is None
