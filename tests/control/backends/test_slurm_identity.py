"""Slurm job identity and reconciliation (issue 28, item 4), through the bridge's discovery pass with the registry
in moto and a scripted slurmrestd listing (``GET /jobs`` as slurmrestd v0.0.38 answers it): a job purged after
``MinJobAge`` before discovery saw it end is closed after the grace period; a cluster re-created under its name
(job ids from 1 again) does not merge its jobs into the old records; a requeued job (Slurm moves its
``submit_time``) stays one job; a failed listing closes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import boto3
import pytest
from moto import mock_aws

from osprey_control.backends.slurm import BridgeSettings, SlurmClient, run_discovery
from osprey_control.backends.slurm.client import SlurmUnavailableError
from osprey_control.backends.slurm.discovery import discover
from osprey_control.backends.slurm.discovery_run import record_discovery
from osprey_control.backends.slurm.instances import StaticInstanceMap
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus, parse_time
from osprey_control.registry.dynamodb import JobRegistry

T0 = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
GRACE = timedelta(minutes=5)
MARKER = "osprey:enabled=true,osprey:policy=training-policy"
SUBMITTED = 1_800_000_000


class ScriptedSlurm:
    """What slurmrestd lists now (``jobs``), or a failure to raise."""

    def __init__(self) -> None:
        self.listing: list[dict[str, Any]] = []
        self.failure: Exception | None = None

    def jobs(self) -> list[dict[str, Any]]:
        if self.failure is not None:
            raise self.failure
        return [dict(job) for job in self.listing]

    def nodes(self) -> list[dict[str, Any]]:
        return []


def _job(
    job_id: int, state: str = "RUNNING", submitted: int = SUBMITTED, restarts: int = 0
) -> dict[str, Any]:
    return {"job_id": job_id, "name": f"train-{job_id}", "job_state": state, "comment": MARKER,
            "submit_time": submitted, "start_time": submitted + 60, "restart_cnt": restarts}  # fmt: skip


@pytest.fixture
def registry() -> Iterator[JobRegistry]:
    with mock_aws():
        registry = JobRegistry(
            "osprey-jobs", client=boto3.client("dynamodb", region_name="us-east-1"), shards=2
        )
        registry.create_table()
        yield registry


def _pass(registry: JobRegistry, slurm: ScriptedSlurm, at: datetime) -> dict[str, Any]:
    found = discover(cast(SlurmClient, slurm), "pc", instances=StaticInstanceMap({}))
    return record_discovery(found, registry, now=at, grace=GRACE)


def _get(registry: JobRegistry, native_id: str) -> JobRecord:
    record = registry.get(JobKey(Backend.SLURM, native_id))
    assert record is not None, native_id
    return record


def test_a_job_purged_after_min_job_age_is_closed_after_the_grace_period(registry: JobRegistry) -> None:
    # Given job 7 running, recorded under <cluster>/<job id>@<submit time>
    slurm = ScriptedSlurm()
    slurm.listing = [_job(7)]
    _pass(registry, slurm, T0)
    native = f"pc/7@{SUBMITTED}"
    assert _get(registry, native).status is JobStatus.RUNNING
    # When it ends and slurmctld purges it (MinJobAge) before discovery sees it end
    slurm.listing = []
    first = _pass(registry, slurm, T0 + timedelta(minutes=1))
    # Then it is missing but active within the grace period, and closed with the reason after it
    assert first["reconciled"]["missing"] == 1
    assert _get(registry, native).active
    _pass(registry, slurm, T0 + timedelta(minutes=1) + GRACE)
    closed = _get(registry, native)
    assert (closed.status, closed.status_time) == (JobStatus.STOPPED, T0 + timedelta(minutes=1))
    [note] = registry.events.status_events(closed.key)
    assert "MinJobAge" in note["reason"]
    assert parse_time(note["recorded_at"]) == T0 + timedelta(minutes=1) + GRACE


def test_a_re_created_cluster_does_not_merge_its_jobs_into_the_old_records(registry: JobRegistry) -> None:
    # Given the old cluster's job 1 running
    slurm = ScriptedSlurm()
    slurm.listing = [_job(1)]
    _pass(registry, slurm, T0)
    # When the cluster is re-created under the same name and its new job 1 (submitted later) is pending
    later = SUBMITTED + 86_400
    slurm.listing = [_job(1, "PENDING", submitted=later)]
    _pass(registry, slurm, T0 + timedelta(minutes=1))
    # Then the new job 1 is its own record, pending, and the old job 1 is closed after the grace period
    assert _get(registry, f"pc/1@{later}").status is JobStatus.PENDING
    assert _get(registry, f"pc/1@{SUBMITTED}").status is JobStatus.RUNNING  # within the grace period
    _pass(registry, slurm, T0 + timedelta(minutes=1) + GRACE)
    assert _get(registry, f"pc/1@{SUBMITTED}").status is JobStatus.STOPPED
    assert [r.native_id for r in registry.list_active(backend=Backend.SLURM)] == [f"pc/1@{later}"]


def test_a_requeued_job_stays_one_job(registry: JobRegistry) -> None:
    # Given job 3 running
    slurm = ScriptedSlurm()
    slurm.listing = [_job(3)]
    _pass(registry, slurm, T0)
    # When Slurm requeues it: pending again, submit_time moved to the requeue, restart_cnt 1
    slurm.listing = [_job(3, "PENDING", submitted=SUBMITTED + 600, restarts=1)]
    _pass(registry, slurm, T0 + timedelta(minutes=10))
    # Then it is still the one record (not a new job, not missing), and nothing else was created
    record = _get(registry, f"pc/3@{SUBMITTED}")
    assert record.missing_since is None
    assert [r.native_id for r in registry.list_active(backend=Backend.SLURM)] == [f"pc/3@{SUBMITTED}"]
    # And when it completes and stays listed (MinJobAge), no second record appears
    slurm.listing = [_job(3, "COMPLETED", submitted=SUBMITTED + 600, restarts=1)]
    _pass(registry, slurm, T0 + timedelta(minutes=20))
    _pass(registry, slurm, T0 + timedelta(minutes=21))
    assert _get(registry, f"pc/3@{SUBMITTED}").status is JobStatus.SUCCEEDED
    assert registry.get(JobKey(Backend.SLURM, f"pc/3@{SUBMITTED + 600}")) is None


def test_a_failed_listing_closes_nothing(registry: JobRegistry) -> None:
    # Given job 7 recorded, then slurmctld unreachable for longer than the grace period
    slurm = ScriptedSlurm()
    slurm.listing = [_job(7)]
    settings = BridgeSettings.model_validate(
        {
            "OSPREY_SLURM_URL": "https://10.0.0.1:6820",
            "OSPREY_SLURM_CLUSTER": "pc",
            "OSPREY_SLURM_TOKEN_SECRET": "s",
        }
    )

    def connect(_: str) -> SlurmClient:
        return cast(SlurmClient, slurm)

    run_discovery(settings, registry, connect=connect, instances=StaticInstanceMap({}))
    slurm.failure = SlurmUnavailableError("list jobs: no answer from slurmrestd")
    for _ in range(3):
        with pytest.raises(SlurmUnavailableError):
            run_discovery(settings, registry, connect=connect, instances=StaticInstanceMap({}))
    # Then the job is neither missing nor closed
    record = _get(registry, f"pc/7@{SUBMITTED}")
    assert (record.status, record.missing_since) == (JobStatus.RUNNING, None)


def test_a_legacy_slurm_record_is_closed_and_the_job_continues_under_its_new_id(
    registry: JobRegistry,
) -> None:
    slurm = ScriptedSlurm()
    slurm.listing = [_job(9)]
    _pass(registry, slurm, T0)
    current = _get(registry, f"pc/9@{SUBMITTED}")
    legacy = current.model_copy(update={"native_id": "pc/9", "version": 0})
    registry.update(legacy.key, lambda _: legacy)
    _pass(registry, slurm, T0 + timedelta(minutes=1))
    assert _get(registry, "pc/9").status is JobStatus.STOPPED
    assert _get(registry, f"pc/9@{SUBMITTED}").status is JobStatus.RUNNING
