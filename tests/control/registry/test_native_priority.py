"""Given a job observed with its priority in the backend's own terms, when the registry merges and stores it,
then the first value seen before Osprey wrote anything is kept through DynamoDB, and what a source reads after
Osprey's first write (Osprey's own value) never replaces it."""

from __future__ import annotations

from datetime import timedelta

from osprey_control.registry import JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.items import item_to_record, record_to_item
from osprey_control.registry.observation import merge_observation
from tests.control.registry.conftest import T0, observation


def test_the_native_priority_survives_the_dynamodb_round_trip(registry: JobRegistry) -> None:
    # Given a job whose first observation carries its native priority
    first = observation("llama").model_copy(update={"native_priority": 700})
    registry.apply_observation(first)
    # When it is read back from the table
    record = registry.get(first.key)
    # Then it holds the value, and the item layout writes and reads it unchanged
    assert record is not None
    assert record.native_priority == 700
    assert item_to_record(record_to_item(record, shards=4)).native_priority == 700


def test_a_job_without_one_reads_back_as_none(registry: JobRegistry) -> None:
    registry.apply_observation(observation("batch-job"))
    record = registry.get(observation("batch-job").key)
    assert record is not None
    assert record.native_priority is None


def test_a_later_observation_never_replaces_the_first_value() -> None:
    # Given a job first seen at native priority 700, later seen at 300 (another reading of the same field)
    first = observation("llama").model_copy(update={"native_priority": 700})
    later = observation("llama", at=T0 + timedelta(minutes=5)).model_copy(update={"native_priority": 300})
    # When both are merged
    merged = merge_observation(merge_observation(None, first), later)
    # Then the first is kept
    assert merged.native_priority == 700


def test_a_value_read_after_osprey_applied_is_not_the_jobs_own(registry: JobRegistry) -> None:
    # Given a job first observed without a native priority (its Workload did not exist yet), whose derived
    # priority Osprey then applied
    job = observation("llama", JobStatus.PENDING)
    registry.apply_observation(job)
    registry.record_applied(job.key, 60, T0 + timedelta(minutes=1))
    # When discovery later reads the backend's field, which now holds Osprey's value
    registry.apply_observation(
        observation("llama", JobStatus.PENDING, at=T0 + timedelta(minutes=2)).model_copy(
            update={"native_priority": 600}
        )
    )
    # Then the registry does not take it for the job's native priority
    record = registry.get(job.key)
    assert record is not None
    assert record.native_priority is None


def test_the_first_value_is_taken_while_nothing_was_applied(registry: JobRegistry) -> None:
    # Given a job first observed without a native priority, nothing applied yet
    registry.apply_observation(observation("llama", JobStatus.PENDING))
    # When a later observation sees it (the Workload now exists)
    later = observation("llama", JobStatus.PENDING, at=T0 + timedelta(minutes=1))
    registry.apply_observation(later.model_copy(update={"native_priority": 500}))
    # Then that is the job's native priority
    record = registry.get(later.key)
    assert record is not None
    assert record.native_priority == 500
