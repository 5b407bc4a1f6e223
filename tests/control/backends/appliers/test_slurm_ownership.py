"""Issue 28, item 2 on Slurm: the applier writes only a job that carries Osprey's marker, on the cluster whose
discovery recorded it. slurmctld is a recording stand-in here (the real one is in tests/slurm)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from osprey_control.backends import Outcome, PriorityChange
from osprey_control.backends.slurm import SlurmApplier
from osprey_control.backends.slurm.client import SlurmClient
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobRecord, JobStatus

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
MARKED = "osprey:enabled=true,osprey:policy=training-policy"


class Slurmctld:
    """One cluster's jobs by id; records every write and which clusters were connected to."""

    def __init__(self, jobs: dict[int, str]) -> None:
        self.jobs = {job_id: {"job_id": job_id, "job_state": "PENDING", "comment": comment, "priority": 5001}
                     for job_id, comment in jobs.items()}  # fmt: skip
        self.updates: list[tuple[int, dict[str, Any]]] = []
        self.connected: list[str] = []

    def job(self, job_id: int) -> dict[str, Any] | None:
        return self.jobs.get(job_id)

    def update_job(self, job_id: int, fields: dict[str, Any]) -> None:
        self.updates.append((job_id, fields))

    def connect(self, cluster: str) -> SlurmClient:
        self.connected.append(cluster)
        return cast(SlurmClient, self)


def _change(native_id: str, priority: int, cluster: str | None = None) -> PriorityChange:
    record = JobRecord(
        backend=Backend.SLURM,
        native_id=native_id,
        name="train",
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=JobStatus.PENDING,
        status_time=NOW,
        applied_priority=50,
        cluster=cluster,
    )
    return PriorityChange(record, priority)


def test_only_jobs_carrying_the_osprey_marker_are_written() -> None:
    # Given a marked job, one whose comment is a user's own, and one that opted out in its marker
    slurm = Slurmctld(
        {1: MARKED, 2: "nightly backup", 3: "osprey:enabled=false,osprey:policy=training-policy"}
    )
    # When the applier is given all three
    report = SlurmApplier(slurm.connect).apply([_change(f"train/{job}", 80, "train") for job in (1, 2, 3)])
    # Then only the marked job was written, and the others are skipped saying why
    assert [job for job, _ in slurm.updates] == [1]
    outcomes = {result.job.native_id: result for result in report.results}
    assert outcomes["train/1"].outcome is Outcome.APPLIED
    for job in ("train/2", "train/3"):
        assert outcomes[job].outcome is Outcome.SKIPPED
        assert "Osprey marker" in outcomes[job].reason


def test_a_record_naming_another_cluster_than_its_job_id_writes_nowhere() -> None:
    # Given cluster "other" running job 42 with a marker, and a record whose native id is train's job 42 but whose
    # cluster field says "other" (job ids repeat across clusters: other's 42 is another job)
    slurm = Slurmctld({42: MARKED})
    # When the applier applies it
    report = SlurmApplier(slurm.connect).apply([_change("train/42", 90, "other")])
    # Then no cluster is written (nor even connected to), and the job fails with the reason
    assert slurm.updates == []
    assert slurm.connected == []
    [result] = report.results
    assert result.outcome is Outcome.FAILED
    assert "cluster other" in result.reason
    assert "cluster train's" in result.reason


def test_a_record_without_a_cluster_field_is_written_on_its_native_ids_cluster() -> None:
    slurm = Slurmctld({7: MARKED})
    report = SlurmApplier(slurm.connect).apply([_change("train/7", 60)])
    assert slurm.connected == ["train"]
    assert report.results[0].outcome is Outcome.APPLIED
