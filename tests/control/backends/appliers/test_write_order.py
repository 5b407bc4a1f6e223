"""Given a cycle that changes many priorities at once on a backend that preempts by priority, when the apply step
writes them one job at a time, then the writes land in the inversion-safe order (running jobs raised, queued
lowered, queued raised, running lowered), so no moment between the two cycles has a queued job above a running
job that neither cycle's priorities put below it."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from osprey_control.backends import ApplyReport, ApplyResult, Outcome, PriorityChange
from osprey_control.backends.eks import DEFAULT_KUEUE_PRIORITY_RANGE, EksApplier, KueuePriorityRange
from osprey_control.backends.write_order import write_phase
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobRecord, JobStatus
from osprey_control.steps.apply import apply_cycle
from tests.control.backends.appliers.test_apply_deadline import Registry

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def record(name: str, status: JobStatus, applied: int, derived: int, changed_minutes_ago: int) -> JobRecord:
    return JobRecord(
        backend=Backend.EKS,
        native_id=f"ns/{name}",
        name=name,
        cluster="gpu",
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=status,
        status_time=NOW,
        derived_priority=derived,
        applied_priority=applied,
        last_changed_at=NOW - timedelta(minutes=changed_minutes_ago),
    )


class OrderRecorder:
    backends = frozenset({Backend.EKS})
    chunk_size = 50

    def __init__(self) -> None:
        self.written: list[str] = []

    def apply(self, changes: Sequence[PriorityChange]) -> ApplyReport:
        self.written.extend(change.record.name for change in changes)
        return ApplyReport(
            [ApplyResult(c.record.key, Outcome.APPLIED, c.priority, "workload") for c in changes]
        )


def test_the_apply_step_raises_running_jobs_before_it_raises_queued_ones() -> None:
    # Given the guard switching a pool back to the policy's order: a running job to be lifted from 55 to 80, a
    # queued one lowered from 60 to 40, a queued one raised from 55 to 70 (above the running job's old 55, below
    # its new 80), and a running job lowered from 90 to 75 (still above 70); the oldest change is the queued
    # raise, which "oldest change first" alone would write first
    records = [
        record("queued-up", JobStatus.PENDING, 55, 70, changed_minutes_ago=50),
        record("running-down", JobStatus.RUNNING, 90, 75, changed_minutes_ago=40),
        record("queued-down", JobStatus.PENDING, 60, 40, changed_minutes_ago=30),
        record("running-up", JobStatus.STARTING, 55, 80, changed_minutes_ago=20),
    ]
    applier = OrderRecorder()
    # When the apply step writes them
    apply_cycle([{"shard": 0}], Registry(records), [applier], now=NOW)
    # Then the running job is lifted before the queued job can rise above it, and lowered last
    assert applier.written == ["running-up", "queued-down", "queued-up", "running-down"]


def test_within_a_phase_the_oldest_change_is_written_first() -> None:
    records = [
        record("newer", JobStatus.PENDING, 50, 60, changed_minutes_ago=5),
        record("older", JobStatus.PENDING, 50, 60, changed_minutes_ago=50),
    ]
    applier = OrderRecorder()
    apply_cycle([{"shard": 0}], Registry(records), [applier], now=NOW)
    assert applier.written == ["older", "newer"]


priorities = st.integers(0, 100)
jobs = st.lists(st.tuples(st.booleans(), priorities, priorities), min_size=1, max_size=8)


def inversions(running: dict[int, int], queued: dict[int, int]) -> set[tuple[int, int]]:
    return {(q, r) for q, r in itertools.product(queued, running) if queued[q] > running[r]}


@given(jobs)
def test_no_moment_of_the_write_order_inverts_a_pair_neither_end_inverts(
    pool: list[tuple[bool, int, int]],
) -> None:
    # Given any pool of running and queued jobs, each moving from an old to a new priority
    old = {i: before for i, (_, before, _) in enumerate(pool)}
    new = {i: after for i, (_, _, after) in enumerate(pool)}
    running = {i for i, (holds, _, _) in enumerate(pool) if holds}
    allowed = inversions(
        {i: old[i] for i in running}, {i: old[i] for i in old if i not in running}
    ) | inversions({i: new[i] for i in running}, {i: new[i] for i in new if i not in running})
    # When the writes land one at a time in write-phase order
    order = sorted(old, key=lambda i: write_phase(holds_gpus=i in running, applied=old[i], priority=new[i]))
    current = dict(old)
    for i in order:
        current[i] = new[i]
        # Then every intermediate state inverts only pairs that the old or the new state inverts
        now = inversions(
            {j: current[j] for j in running}, {j: current[j] for j in current if j not in running}
        )
        assert now <= allowed


class KueueOrderRecorder(OrderRecorder):
    """Reads what an unwritten Workload holds the way the EKS applier does (its class value through the range)."""

    unwritten_priority = EksApplier.unwritten_priority
    priority_range = DEFAULT_KUEUE_PRIORITY_RANGE


def test_a_just_admitted_job_of_a_high_class_lowered_into_the_band_is_written_last() -> None:
    # Given a job of class 1000 admitted since the last cycle (Osprey never wrote it: Kueue holds 1000, Osprey's
    # 100), to be lowered to 80, and a queued job to be lowered from 85 to 75
    admitted = record("admitted-top", JobStatus.STARTING, 0, 80, changed_minutes_ago=30).model_copy(
        update={"applied_priority": None, "native_priority": 1000}
    )
    queued = record("queued", JobStatus.PENDING, 85, 75, changed_minutes_ago=10)
    applier = KueueOrderRecorder()
    # When the apply step writes them
    apply_cycle([{"shard": 0}], Registry([admitted, queued]), [applier], now=NOW)
    # Then the running job's first write is a lowering from its class value, written after the queued job is
    # lowered (written first, it would sit at 80 under the queued job's 85, which would preempt it)
    assert applier.written == ["queued", "admitted-top"]


def test_the_eks_applier_reads_an_unwritten_workload_at_its_class_value() -> None:
    unwritten = record("new", JobStatus.PENDING, 0, 50, changed_minutes_ago=1).model_copy(
        update={"applied_priority": None, "native_priority": 1000}
    )
    assert EksApplier().unwritten_priority(unwritten) == 100.0
    assert EksApplier(priority_range=KueuePriorityRange(500, 1500)).unwritten_priority(unwritten) == 50.0
    assert EksApplier().unwritten_priority(unwritten.model_copy(update={"native_priority": None})) is None


@given(st.integers(0, 100), st.integers(-1000, 1000), st.integers(1, 5000))
def test_unmap_inverts_map_within_its_rounding(priority: int, low: int, width: int) -> None:
    band = KueuePriorityRange(low, low + width)
    assert abs(band.unmap(band.map(priority)) - priority) <= 50 / width + 1e-9
