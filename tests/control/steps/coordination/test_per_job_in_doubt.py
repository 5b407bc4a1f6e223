"""Issue 28 item 1 for the per-job appliers (SageMaker tags, service jobs): a late write of an old execution is
repaired by the next cycle from the call's write intent, and a job's write starts only if its bound ends before
the lease (moto registry, an in-memory backend behind a real ReadThenWriteApplier)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from osprey_control.backends.actuation import LiveJob, PriorityChange, ReadThenWriteApplier
from osprey_control.contract import OspreyBlock
from osprey_control.registry import Backend, JobKey, JobStatus, WriteIntents
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.fence import Fence
from osprey_control.registry.lease import CycleLease
from osprey_control.registry.observation import JobObservation
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.deadline import Deadline
from tests.control.steps.coordination.conftest import T0, TABLE

EPOCH = 1_800_000_000.0


class Tags(ReadThenWriteApplier):
    """SageMaker-like: each job's priority is a value in ``backend``; ``before_write`` runs inside a write."""

    backends = frozenset({Backend.SAGEMAKER})
    service = "sagemaker"
    write_bound_ms = 48_000.0

    def __init__(self, backend: dict[str, str], before_write: Callable[[], None] | None = None) -> None:
        super().__init__(client=object())
        self.backend, self.before_write, self.writes = backend, before_write, 0

    def _read(self, change: PriorityChange) -> LiveJob:
        native = change.record.native_id
        return LiveJob({"osprey:enabled": "true"}, self.backend.get(native), str(change.priority))

    def _write(self, change: PriorityChange, live: LiveJob) -> None:
        self.writes += 1
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            hook()
        self.backend[change.record.native_id] = live.target


def add(registry: JobRegistry, name: str) -> JobKey:
    observed = JobObservation(
        backend=Backend.SAGEMAKER,
        native_id=name,
        name=name,
        block=OspreyBlock(priority_derivation_profile="training-policy"),
        status=JobStatus.RUNNING,
        event_time=T0,
    )
    return registry.apply_observation(observed).record.key


def decide(registry: JobRegistry, key: JobKey, priority: int, fence: Fence) -> None:
    current = registry.get(key)
    assert current is not None
    registry.record_decision(key, {"reason": f"p{priority}"}, priority, current.version, T0, fence=fence)


def test_a_late_per_job_write_is_repaired_and_only_its_jobs_are_rewritten(
    registry: JobRegistry, lease: CycleLease
) -> None:
    # Given two jobs derived by "old": "train" to 40 and "eval" to 30
    train, evaluate = add(registry, "train"), add(registry, "eval")
    first = lease.acquire("old", ttl_seconds=300, now=T0)
    assert first.token is not None
    old = Fence(TABLE, first.token, registry.client)
    decide(registry, train, 40, old)
    decide(registry, evaluate, 30, old)
    backend: dict[str, str] = {}

    def newer() -> None:  # "old"'s lease expired during its first write: "new" applies 80 to train
        taken = lease.acquire("new", ttl_seconds=300, now=T0 + timedelta(seconds=301))
        assert taken.token is not None
        new = Fence(TABLE, taken.token, registry.client)
        decide(registry, train, 80, new)
        apply_cycle([{"shard": None}], registry, [Tags(backend)], now=T0, fence=new)
        assert backend["train"] == "80"
        lease.release("new")

    # When the old execution's write of train's 40 lands after that
    apply_cycle([{"shard": None}], registry, [Tags(backend, before_write=newer)], now=T0, fence=old)
    assert backend["train"] == "40"
    [intent] = WriteIntents(TABLE, registry.client).open()
    assert intent.token == old.token
    assert set(intent.keys or ()) == {train, evaluate}

    # Then the next cycle writes train's 80 again (eval, applied by "new" too, is found in place)
    taken = lease.acquire("next", ttl_seconds=300, now=T0 + timedelta(seconds=700))
    assert taken.token is not None
    repair = Tags(backend)
    apply_cycle(
        [{"shard": None}], registry, [repair], now=T0, fence=Fence(TABLE, taken.token, registry.client)
    )
    assert backend == {"train": "80", "eval": "30"}
    assert repair.writes == 1
    record = registry.get(train)
    assert record is not None
    assert (record.derived_priority, record.applied_priority) == (80, 80)


def test_a_job_write_starts_only_if_its_bound_ends_before_the_lease(
    registry: JobRegistry, lease: CycleLease
) -> None:
    # Given three pending jobs, 48 s per job at most, and a lease with 110 s left (margin 11 s: 99 s of work)
    keys = [add(registry, name) for name in ("a", "b", "c")]
    taken = lease.acquire("cycle", ttl_seconds=300, now=T0)
    assert taken.token is not None
    fence = Fence(TABLE, taken.token, registry.client)
    for key in keys:
        decide(registry, key, 50, fence)
    clock = [EPOCH]
    deadline = Deadline.for_invocation(
        lambda: 900_000.0, lease_expires_at=EPOCH + 110, clock=lambda: clock[0]
    )
    backend: dict[str, str] = {}

    class Slow(Tags):
        def _write(self, change: PriorityChange, live: LiveJob) -> None:
            clock[0] += 48  # every write takes its whole bound
            super()._write(change, live)

    applier = Slow(backend)

    # When the apply step runs
    report = apply_cycle([{"shard": None}], registry, [applier], now=T0, deadline=deadline, fence=fence)

    # Then two jobs were written (the second ends at 96 s < 99 s), the third waits for the next cycle, and the
    # step stopped for time, not for a lost fence
    assert len(backend) == 2
    assert len(report.deferred) == 1
    assert not report.fence_lost
    assert sum(1 for key in keys if (record := registry.get(key)) is not None and record.apply_pending()) == 1
