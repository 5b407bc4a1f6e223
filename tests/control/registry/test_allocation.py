"""Given job events in any order and any number of times, when merged into the registry, then the allocation
intervals (the attained_service signal) are the same, closed where the job stopped running, bounded in size,
and old items without them still load."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from osprey_control.registry import Backend, JobKey, JobStatus
from osprey_control.registry.allocation import MAX_MARKS, AllocationMark, Allocations
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.items import item_to_record, record_to_item
from osprey_control.registry.observation import JobObservation, merge_observation
from tests.control.registry.conftest import T0, TABLE, observation

KEY = JobKey(Backend.BATCH, "llama-pretrain")


def _at(minutes: float) -> Any:
    return T0 + timedelta(minutes=minutes)


def _observed(status: JobStatus, minutes: float, gpus: int | None = 8, **extra: Any) -> JobObservation:
    return observation(status=status, at=_at(minutes)).model_copy(update={"requested_gpus": gpus, **extra})


# A Batch job retried once: RUNNABLE, RUNNING, back to RUNNABLE (attempt 1 failed), RUNNING, SUCCEEDED.
RETRIED = (
    _observed(JobStatus.PENDING, 0),
    _observed(JobStatus.RUNNING, 10),
    _observed(JobStatus.PENDING, 40),
    _observed(JobStatus.STARTING, 50),
    _observed(JobStatus.RUNNING, 55),
    _observed(JobStatus.RUNNING, 70),  # a second RUNNING event of the same attempt
    _observed(JobStatus.SUCCEEDED, 85),
)


def _merged(observations: Any) -> Any:
    record = None
    for item in observations:
        record = merge_observation(record, item)
    assert record is not None
    return record


def test_given_a_retried_job_when_merged_then_each_attempt_is_one_closed_interval() -> None:
    # When
    record = _merged(RETRIED)

    # Then: the status only moved forward, but the history has both attempts
    assert record.status is JobStatus.SUCCEEDED
    spans = [(span.start, span.end, span.gpus) for span in record.allocations.spans()]
    assert spans == [(_at(10), _at(40), 8), (_at(55), _at(85), 8)]


@given(st.permutations(RETRIED), st.lists(st.sampled_from(RETRIED), max_size=5))
def test_given_any_order_with_replays_when_merged_then_the_history_is_the_same(
    order: list[JobObservation], replays: list[JobObservation]
) -> None:
    assert _merged([*order, *replays]).allocations == _merged(RETRIED).allocations


def test_given_a_late_stop_between_two_runs_when_merged_then_it_is_placed_where_it_happened() -> None:
    # Given: running at 10, running again at 55 (attempt 2), and the stop at 40 delivered last
    record = _merged([_observed(JobStatus.RUNNING, 10), _observed(JobStatus.RUNNING, 55)])
    assert [(s.start, s.end) for s in record.allocations.spans()] == [(_at(10), None)]

    # When
    record = merge_observation(record, _observed(JobStatus.PENDING, 40))

    # Then
    assert [(s.start, s.end) for s in record.allocations.spans()] == [(_at(10), _at(40)), (_at(55), None)]


def test_given_a_resize_while_running_when_merged_then_a_new_interval_starts_at_the_new_size() -> None:
    record = _merged([_observed(JobStatus.RUNNING, 0, gpus=None), _observed(JobStatus.RUNNING, 0, gpus=8)])
    record = merge_observation(record, _observed(JobStatus.RUNNING, 30, gpus=16))
    assert [(s.start, s.end, s.gpus) for s in record.allocations.spans()] == [
        (_at(0), _at(30), 8),
        (_at(30), None, 16),
    ]


def test_given_a_multinode_node_event_when_merged_then_it_adds_no_mark() -> None:
    record = _merged(
        [_observed(JobStatus.RUNNING, 0), _observed(JobStatus.PENDING, 5, marks_allocation=False)]
    )
    assert [(s.start, s.end) for s in record.allocations.spans()] == [(_at(0), None)]


def test_given_more_attempts_than_the_bound_when_merged_then_old_intervals_fold_into_sums() -> None:
    # Given: 40 attempts of 10 minutes on 8 GPUs, 5 minutes apart
    allocations = Allocations()
    for attempt in range(40):
        start = attempt * 15
        allocations = allocations.with_mark(AllocationMark(at=_at(start), running=True, gpus=8))
        allocations = allocations.with_mark(AllocationMark(at=_at(start + 10), running=False))

    # Then: at most MAX_MARKS marks, and nothing lost from the totals
    assert len(allocations.marks) <= MAX_MARKS
    assert allocations.folded_until is not None
    kept = sum(((s.end or s.start) - s.start).total_seconds() for s in allocations.spans())
    assert allocations.folded_seconds + kept == 40 * 600
    assert allocations.folded_gpu_seconds == allocations.folded_seconds * 8
    assert not allocations.folded_gpus_unknown

    # And: an event older than the fold can no longer be placed, so it changes nothing
    late = AllocationMark(at=_at(1), running=False)
    assert allocations.with_mark(late) == allocations


def test_given_a_record_with_history_when_stored_then_it_reads_back_equal(registry: JobRegistry) -> None:
    # Given / When: the retried job through DynamoDB (moto), declared limit and GPUs included
    for item in RETRIED:
        registry.apply_observation(item.model_copy(update={"declared_runtime_s": 7200}))

    # Then
    record = registry.get(KEY)
    assert record is not None
    assert record == _merged(
        [item.model_copy(update={"declared_runtime_s": 7200}) for item in RETRIED]
    ).model_copy(update={"version": record.version})
    assert (record.declared_runtime_s, record.requested_gpus) == (7200, 8)
    assert len(record.allocations.spans()) == 2


def test_given_folded_history_when_serialised_then_the_item_round_trips() -> None:
    allocations = Allocations()
    for attempt in range(40):
        allocations = allocations.with_mark(AllocationMark(at=_at(attempt * 15), running=True, gpus=None))
        allocations = allocations.with_mark(AllocationMark(at=_at(attempt * 15 + 10), running=False))
    record = _merged(RETRIED).model_copy(update={"allocations": allocations})
    item = record_to_item(record, shards=4)
    assert item["allocations"]["M"]["marks"]["L"][0]["S"].endswith(" R")
    assert item_to_record(item) == record
    assert allocations.folded_gpus_unknown


def test_given_an_item_written_before_these_fields_when_read_then_it_loads_without_them(
    registry: JobRegistry, dynamodb: Any
) -> None:
    # Given: an item as the previous version wrote it (no declared limit, GPUs or allocations)
    registry.apply_observation(observation())
    item = dynamodb.get_item(
        TableName=TABLE, Key={"pk": {"S": "JOB#batch#llama-pretrain"}, "sk": {"S": "META"}}
    )
    old = {
        name: value for name, value in item["Item"].items() if name not in {"allocations", "requested_gpus"}
    }
    dynamodb.put_item(TableName=TABLE, Item=old)

    # When
    record = registry.get(KEY)

    # Then
    assert record is not None
    assert (record.declared_runtime_s, record.requested_gpus) == (None, None)
    assert record.allocations.empty
