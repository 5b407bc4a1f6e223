"""Given pending jobs and an apply step running short of time, when it applies them, then each applier call's
outcomes are recorded as soon as it returns, no call starts after the deadline's margin, the jobs not reached
stay pending and are reported deferred, and the next cycle applies them; Batch still gets all its jobs in one
call."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from osprey_control.backends import ApplyReport, ApplyResult, Outcome, PriorityChange
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus
from osprey_control.registry.fence import Fence
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.deadline import Deadline

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def job(backend: Backend, name: str) -> JobRecord:
    return JobRecord(
        backend=backend,
        native_id=name,
        name=name,
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=JobStatus.RUNNING,
        status_time=NOW,
        derived_priority=60,
        applied_priority=50,
    )


class Registry:
    def __init__(self, records: Sequence[JobRecord]) -> None:
        self.records = {record.key: record for record in records}

    def get(self, key: JobKey) -> JobRecord | None:
        return self.records.get(key)

    def record_applied(
        self, key: JobKey, priority: int, now: datetime, *, fence: Fence | None = None, detail: str = ""
    ) -> JobRecord:
        self.records[key] = self.records[key].model_copy(update={"applied_priority": priority})
        return self.records[key]

    def record_shadow(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("no job of this test is in shadow mode")

    def record_apply_failure(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("no failure expected")

    def pending(self) -> set[str]:
        return {key.native_id for key, record in self.records.items() if record.apply_pending()}

    def pending_keys(self, shard: int | None = None) -> list[JobKey]:
        """The apply-pending index (one shard here)."""
        return [key for key, record in self.records.items() if record.apply_pending()]


class Clock:
    def __init__(self, remaining_ms: float) -> None:
        self.remaining_ms = remaining_ms

    def __call__(self) -> float:
        return self.remaining_ms


class FakeApplier:
    """Applies every job it gets; each call takes ``cost_ms`` of the clock and notes what was pending then."""

    def __init__(
        self, backend: Backend, registry: Registry, clock: Clock, cost_ms: float, chunk_size: int | None
    ) -> None:
        self.backends = frozenset({backend})
        self.chunk_size = chunk_size
        self.registry, self.clock, self.cost_ms = registry, clock, cost_ms
        self.calls: list[list[str]] = []
        self.pending_at_call: list[set[str]] = []
        # The most one job (a whole-cycle applier: its call) may take; the apply step starts only what fits.
        self.write_bound_ms = cost_ms / (chunk_size or 1)

    def apply(self, changes: Sequence[PriorityChange]) -> ApplyReport:
        self.pending_at_call.append(self.registry.pending())
        self.calls.append([change.record.native_id for change in changes])
        self.clock.remaining_ms -= self.cost_ms
        return ApplyReport(
            [
                ApplyResult(change.record.key, Outcome.APPLIED, change.priority, "written")
                for change in changes
            ]
        )


def reports(registry: Registry) -> list[dict[str, Any]]:
    """What the next cycle's shard reports: its counts (the apply step reads the pending jobs itself)."""
    return [{"shard": 0, "evaluated": len(registry.records), "pending": len(registry.pending())}]


def test_the_deadline_stops_apply_between_calls_and_the_next_cycle_applies_the_rest() -> None:
    # Given six pending SageMaker jobs, an applier taking two jobs and 15 s per call, and 30 s before the margin
    jobs = [job(Backend.SAGEMAKER, f"job-{n}") for n in range(6)]
    registry = Registry(jobs)
    clock = Clock(40_000)
    applier = FakeApplier(Backend.SAGEMAKER, registry, clock, cost_ms=15_000, chunk_size=2)

    # When the apply step runs
    first = apply_cycle(
        reports(registry), registry, [applier], now=NOW, deadline=Deadline(clock, margin_ms=10_000)
    )

    # Then two calls ran, each recorded before the next one started, and exactly the rest is deferred
    assert applier.calls == [["job-0", "job-1"], ["job-2", "job-3"]]
    assert applier.pending_at_call[1] == {"job-2", "job-3", "job-4", "job-5"}
    assert [result.job.native_id for result in first.applied] == ["job-0", "job-1", "job-2", "job-3"]
    assert [key.native_id for key in first.deferred] == ["job-4", "job-5"]
    assert registry.pending() == {"job-4", "job-5"}
    # ... and the next cycle, with time again, applies the deferred jobs
    second = apply_cycle(reports(registry), registry, [applier], now=NOW, deadline=Deadline.never())
    assert [result.job.native_id for result in second.applied] == ["job-4", "job-5"]
    assert second.deferred == []
    assert registry.pending() == set()


def test_batch_gets_all_its_jobs_in_one_call_before_the_per_job_appliers() -> None:
    # Given three Batch jobs, three SageMaker jobs and time for only one call (16 s before the margin, whose
    # bound is 15 s; a SageMaker job's is 2 s)
    jobs = [job(Backend.SAGEMAKER, f"sm-{n}") for n in range(3)] + [
        job(Backend.BATCH, f"b-{n}") for n in range(3)
    ]
    registry = Registry(jobs)
    clock = Clock(26_000)
    batch = FakeApplier(Backend.BATCH, registry, clock, cost_ms=15_000, chunk_size=None)
    sagemaker = FakeApplier(Backend.SAGEMAKER, registry, clock, cost_ms=4_000, chunk_size=2)

    # When the apply step runs
    report = apply_cycle(
        reports(registry), registry, [sagemaker, batch], now=NOW, deadline=Deadline(clock, margin_ms=10_000)
    )

    # Then Batch's one call had all its jobs (one UpdateSchedulingPolicy per policy), and the rest is deferred
    assert batch.calls == [["b-0", "b-1", "b-2"]]
    assert sagemaker.calls == []
    assert sorted(key.native_id for key in report.deferred) == ["sm-0", "sm-1", "sm-2"]
    assert registry.pending() == {"sm-0", "sm-1", "sm-2"}
