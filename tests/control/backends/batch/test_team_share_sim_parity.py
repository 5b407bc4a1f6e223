"""The simulator's ``fairshare+osprey`` and the production Batch path give Osprey's team shares the same
weights for the same state: the simulation runs, its state at a cycle is copied into moto's Batch and the
registry, the production apply step runs, and the scheduling policy holds what the simulator wrote."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from moto import mock_aws

from osprey.simulate import FairShareOsprey
from osprey.simulate.runner import load_default_policy
from osprey.simulate.sim import JobRun, Status
from osprey_control.derivation import AllocationInterval
from osprey_control.registry import Backend, JobRecord, JobStatus
from osprey_control.registry.allocation import AllocationMark, Allocations
from tests.control.backends.batch.test_team_share_applier import BLOCK, ENABLED, World
from tests.simulate.helpers import job, run, workload

EPOCH = datetime(2026, 12, 2, 0, 0, tzinfo=UTC)  # simulated time 0
SNAPSHOT_S = 1800.0  # the first cycle at or after this instant is copied
_STATUS = {
    Status.QUEUED: JobStatus.PENDING,
    Status.STARTING: JobStatus.STARTING,
    Status.TRAINING: JobStatus.RUNNING,
}

# Two teams, two size classes each, on 16 GPUs; nothing ends before the snapshot, so the registry's active
# jobs are all the jobs the simulator's shares hold.
SCENARIO = workload(
    job("a8", 0, 8, 20000, share="a", declared=30000),
    job("a2", 0, 2, 20000, share="a", declared=30000),
    job("b4", 30, 4, 20000, share="b", declared=30000),
    job("a8q", 60, 8, 5000, share="a", declared=7200),
    job("b2q", 90, 2, 5000, share="b", declared=7200),
    job("b8q", 120, 8, 5000, share="b", declared=7200),
)


@dataclass(frozen=True)
class Copied:
    share: str
    status: Status
    intervals: tuple[AllocationInterval, ...]
    priority: int | None
    gpus: int
    name: str


class Probe(FairShareOsprey):
    """fairshare+osprey, unchanged, that copies its state and the weights it wrote at the snapshot's cycle."""

    def __init__(self) -> None:
        super().__init__(load_default_policy(), cycle_s=60)
        self.at: float | None = None
        self.jobs: list[Copied] = []
        self.weights: dict[str, float] = {}

    def on_cycle(self, now: float) -> None:
        super().on_cycle(now)
        if self.at is not None or now < SNAPSHOT_S:
            return
        runs: list[JobRun] = [run for runs in self._members.values() for run in runs]
        assert all(run.end_s is None for run in runs)
        self.at = now
        self.jobs = [
            Copied(self.share_of(r), r.status, tuple(r.intervals), r.priority, r.job.gpus, r.job.job_id)
            for r in runs
        ]
        self.weights = {share: self.weight_of(share) for share in self._members}


@pytest.fixture
def world() -> Iterator[World]:
    with mock_aws(config={"batch": {"use_docker": False}}):
        yield World()


def _marks(intervals: tuple[AllocationInterval, ...]) -> tuple[AllocationMark, ...]:
    marks: list[AllocationMark] = []
    for interval in intervals:
        marks.append(
            AllocationMark(at=EPOCH + timedelta(seconds=interval.start_s), running=True, gpus=interval.gpus)
        )
        if interval.end_s is not None:
            marks.append(AllocationMark(at=EPOCH + timedelta(seconds=interval.end_s), running=False))
    return tuple(marks)


def _record(world: World, copied: Copied) -> JobRecord:
    job_id = world.batch.submit_job(
        jobName=copied.name,
        jobQueue=world.queue,
        jobDefinition="train",
        shareIdentifier=copied.share,
        tags=ENABLED,
    )["jobId"]
    return JobRecord(
        backend=Backend.BATCH,
        native_id=job_id,
        name=copied.name,
        block=BLOCK,
        status=_STATUS[copied.status],
        status_time=world.now,
        job_queue=world.queue,
        share_identifier=copied.share,
        tags=ENABLED,
        requested_gpus=copied.gpus,
        allocations=Allocations(marks=_marks(copied.intervals)),
        applied_priority=copied.priority,
        derived_priority=copied.priority,
    )


def test_the_simulator_and_production_write_the_same_team_share_weights(world: World) -> None:
    # Given fairshare+osprey's state at a cycle: queued and running jobs of two teams in four team shares
    probe = Probe()
    run(SCENARIO, probe)
    assert probe.at is not None
    assert {copied.status for copied in probe.jobs} >= {Status.QUEUED, Status.TRAINING}
    assert len(probe.weights) == 4

    # When the same jobs are in the registry and moto's Batch and the production apply step runs at that instant
    world.now = EPOCH + timedelta(seconds=probe.at)
    for copied in probe.jobs:
        world.store(_record(world, copied))
    world.cycle()

    # Then every team share holds the weight the simulator wrote, the policy's other entries as they were
    shares = world.shares()
    assert {share: shares[share] for share in probe.weights} == probe.weights
    assert shares["vision"] == 2.0
