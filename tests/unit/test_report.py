"""Given a small recorded history written through the registry's own writers (moto): two batch jobs before
enforcement (one holding its GPUs idle while the other waits, shadow decisions, a gang that timed out to
serial), then the first applied outcome, a job that runs and one still queued, and an EKS job Osprey only
watched; when the report is computed over it, then every number a user would check is the hand-computed one.

Times (UTC, ISO week 2026-W49 starts Monday 2026-11-30), batch queue Q, 8 GPUs each:
  A  submitted Mon 00:00, running 01:00-05:00 (wait 1 h); its decision at 02:00 records 5 % GPU utilization
  B  submitted Mon 00:30, running 03:30-05:30 (wait 3 h); its gang timed out to serial after 1 requeue
  -> A holds 8 idle GPUs 02:00-03:30 while B waits: 12 idle GPU-hours, and 01:00-02:00 unknown: 8 GPU-hours
  C  submitted Wed 06:00, derived and applied at 06:00 (enforcement starts), running from 06:30, util 95 %
  D  submitted Wed 07:00, still pending at the report (Sat 12:00)
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey.report import (
    OBSERVATION_NOTE,
    SHADOW_OUTCOME,
    JobTrail,
    Report,
    Snapshot,
    build_report,
    parse_since,
    read_snapshot,
)
from osprey_control.contract import parse_block
from osprey_control.gang import GangPhase, GangState
from osprey_control.gang.store import GangStore
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus, NodeKind, NodeRef
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation

TABLE = "osprey-jobs"
REGION = "us-east-1"
MON = datetime(2026, 11, 30, tzinfo=UTC)
NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)
ENFORCED = MON + timedelta(days=2, hours=6)
QUEUE = "arn:aws:batch:us-east-1:123456789012:job-queue/gpu"


class History:
    """Writes one job's events through the registry as ingest, derive, apply and the gang watch do."""

    def __init__(self, registry: JobRegistry, shift: timedelta) -> None:
        self.registry, self.shift = registry, shift

    def at(self, when: datetime) -> datetime:
        return when + self.shift

    def observe(
        self, name: str, status: JobStatus, when: datetime, submitted: datetime, **extra: Any
    ) -> JobKey:
        backend = extra.pop("backend", Backend.BATCH)
        observation = JobObservation(
            backend=backend,
            native_id=f"gpu/ml/{name}/uid-{name}" if backend is Backend.EKS else f"id-{name}",
            name=name,
            block=parse_block({"priority_derivation_profile": "training-policy"}),
            status=status,
            event_time=self.at(when),
            submitted_at=self.at(submitted),
            job_queue=None if backend is Backend.EKS else QUEUE,
            cluster="gpu" if backend is Backend.EKS else None,
            requested_gpus=8,
            **extra,
        )
        self.registry.apply_observation(observation)
        return observation.key

    def decide(self, key: JobKey, when: datetime, priority: int, utilization: float | None = None) -> None:
        record = self.registry.get(key)
        assert record is not None
        previous = record.derived_priority if record.derived_priority is not None else 50
        nodes = {} if utilization is None else {"gpu_utilization": [2, utilization, utilization, utilization]}
        decision = {
            "priority": priority,
            "previous": previous,
            "target": float(priority),
            "base": float(priority),
            "reason": "derived",
            "rules": [],
            "inputs": {"nodes": nodes, "job": {"queue_wait": 60.0}},
        }
        self.registry.record_decision(key, decision, priority, record.version, self.at(when))

    def apply(self, key: JobKey, when: datetime, priority: int, outcome: str) -> None:
        self.registry.events.record_apply(
            key, priority=priority, outcome=outcome, detail="", now=self.at(when), expires=2_000_000_000
        )

    def gang(self, key: JobKey, phase: GangPhase, started: datetime, when: datetime, **extra: Any) -> None:
        state = GangState(
            phase=phase,
            attempt=1,
            watch_started_at=self.at(started),
            attempt_started_at=self.at(started),
            **extra,
        )
        GangStore(self.registry.table_name, self.registry.client).save(
            key, state, 0, updated_at=self.at(when)
        )


def record_history(registry: JobRegistry, shift: timedelta = timedelta()) -> None:
    """The module docstring's history, every time moved by ``shift``."""
    h = History(registry, shift)
    hour = timedelta(hours=1)
    a = h.observe("a", JobStatus.PENDING, MON, MON)
    h.apply(a, MON + timedelta(minutes=5), 50, SHADOW_OUTCOME)
    b = h.observe("b", JobStatus.PENDING, MON + hour / 2, MON + hour / 2)
    h.decide(b, MON + timedelta(minutes=35), 55)
    h.apply(b, MON + timedelta(minutes=35), 55, SHADOW_OUTCOME)  # passes A (50), submitted before it
    h.observe("a", JobStatus.RUNNING, MON + hour, MON)
    h.decide(a, MON + 2 * hour, 60, utilization=5.0)
    h.apply(a, MON + 2 * hour, 60, SHADOW_OUTCOME)  # 50 -> 60 passes B (55)
    h.observe("b", JobStatus.RUNNING, MON + 3.5 * hour, MON + hour / 2)
    h.gang(b, GangPhase.SERIAL, MON + 1.5 * hour, MON + 3.5 * hour, requeues=1, ready_in_time=False)
    h.observe("a", JobStatus.SUCCEEDED, MON + 5 * hour, MON)
    h.observe("b", JobStatus.SUCCEEDED, MON + 5.5 * hour, MON + hour / 2)
    c = h.observe("c", JobStatus.PENDING, ENFORCED, ENFORCED)
    h.decide(c, ENFORCED, 70)
    h.apply(c, ENFORCED, 70, "applied")
    h.observe("c", JobStatus.RUNNING, ENFORCED + hour / 2, ENFORCED)
    h.decide(c, ENFORCED + 0.75 * hour, 72, utilization=95.0)
    h.apply(c, ENFORCED + 0.75 * hour, 72, "applied")
    h.gang(
        c,
        GangPhase.READY,
        ENFORCED,
        ENFORCED + 0.75 * hour,
        ready_at=h.at(ENFORCED + 0.6 * hour),
        ready_in_time=True,
    )
    d = h.observe("d", JobStatus.PENDING, ENFORCED + hour, ENFORCED + hour)
    h.decide(d, ENFORCED + timedelta(hours=1, minutes=5), 40)
    # An EKS job Osprey only watched: decisions, no applied outcome.
    e = h.observe("e", JobStatus.PENDING, MON + 24 * hour, MON + 24 * hour, backend=Backend.EKS)
    h.observe("e", JobStatus.RUNNING, MON + 26 * hour, MON + 24 * hour, backend=Backend.EKS)
    h.decide(e, MON + 26 * hour, 65, utilization=80.0)
    h.observe("e", JobStatus.SUCCEEDED, MON + 30 * hour, MON + 24 * hour, backend=Backend.EKS)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[JobRegistry]:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        registry = JobRegistry(TABLE, boto3.client("dynamodb", region_name=REGION), shards=2)
        registry.create_table()
        yield registry


def _report(registry: JobRegistry, since: datetime) -> dict[str, Any]:
    report: Report = build_report(read_snapshot(registry, NOW), since)
    return report.to_dict()


def _backend(found: dict[str, Any], name: str) -> dict[str, Any]:
    return next(backend for backend in found["backends"] if backend["backend"] == name)


def test_the_numbers_before_and_after_enforcement_are_the_hand_computed_ones(registry: JobRegistry) -> None:
    record_history(registry)
    batch = _backend(_report(registry, MON), "batch")
    assert batch["enforcement_start"] == ENFORCED.isoformat()
    before, after = batch["comparison"]["before"], batch["comparison"]["after"]
    assert batch["comparison"]["note"] == OBSERVATION_NOTE
    # Before: waits 1 h and 3 h; A idle 1.5 h on 8 GPUs while B waited, 1 h unknown; churn 2 changes / 10 job-h.
    assert (before["jobs"], before["started"], before["still_waiting"]) == (2, 2, 0)
    assert (before["mean_wait_s"], before["p95_wait_s"]) == (7200.0, 10800.0)
    assert before["gpu_hours"] == 48.0  # A 4 h + B 2 h, 8 GPUs
    assert before["idle_while_waiting_gpu_hours"] == 12.0
    assert before["unknown_utilization_while_waiting_gpu_hours"] == 8.0
    assert (before["priority_changes"], before["job_hours"]) == (2, 10.0)
    assert before["priority_changes_per_job_hour"] == 0.2
    assert before["gangs"] == {"ready": 0, "ready_in_time": 0, "serial": 1, "failed": 0, "requeues": 1}
    assert before["shadow"] == {"decisions": 3, "order_changes": 2}
    # After: C waited 30 min, D still waits; C at 95 % is not idle; C 77.5 h on 8 GPUs; 3 changes / 155 job-h.
    assert (after["jobs"], after["started"], after["still_waiting"]) == (2, 1, 1)
    assert (after["mean_wait_s"], after["p95_wait_s"]) == (1800.0, 1800.0)
    assert after["gpu_hours"] == 620.0
    assert after["idle_while_waiting_gpu_hours"] == 0.0
    assert after["unknown_utilization_while_waiting_gpu_hours"] == 0.0
    assert (after["priority_changes"], after["job_hours"]) == (3, 155.0)
    assert after["priority_changes_per_job_hour"] == round(3 / 155, 3)
    assert after["gangs"] == {"ready": 1, "ready_in_time": 1, "serial": 0, "failed": 0, "requeues": 0}
    assert after["shadow"] == {"decisions": 0, "order_changes": 0}


def test_the_week_of_enforcement_is_split_and_an_empty_week_is_a_row(registry: JobRegistry) -> None:
    record_history(registry)
    batch = _backend(_report(registry, MON - timedelta(days=7)), "batch")
    rows = [(row["week"], row["period"], row["jobs"], row["gpu_hours"]) for row in batch["weeks"]]
    assert rows == [
        ("2026-W48", "before", 0, 0.0),
        ("2026-W49", "before", 2, 48.0),
        ("2026-W49", "enforced", 2, 620.0),
    ]
    assert batch["weeks"][2]["start"] == ENFORCED.isoformat()


def test_a_backend_osprey_only_watched_has_no_comparison(registry: JobRegistry) -> None:
    record_history(registry)
    eks = _backend(_report(registry, MON), "eks")
    assert eks["enforcement_start"] is None
    assert eks["comparison"]["before"] is None
    assert eks["comparison"]["note"].startswith("not enforced")
    (week,) = eks["weeks"]
    assert (week["period"], week["mean_wait_s"], week["gpu_hours"]) == ("before", 7200.0, 32.0)


def test_since_leaves_out_what_ended_before_it_and_the_comparison_says_why(registry: JobRegistry) -> None:
    record_history(registry)
    since = MON + timedelta(
        days=3
    )  # Thursday: A, B and the EKS job ended before it, enforcement began earlier
    found = _report(registry, since)
    assert [backend["backend"] for backend in found["backends"]] == ["batch"]
    batch = found["backends"][0]
    assert batch["comparison"]["before"] is None
    assert "widen --since" in batch["comparison"]["note"]
    (week,) = batch["weeks"]
    assert (week["week"], week["period"], week["jobs"], week["started"]) == ("2026-W49", "enforced", 2, 0)
    assert week["gpu_hours"] == 60 * 8  # C from Thursday 00:00 to Saturday 12:00
    assert week["mean_wait_s"] is None


def test_an_empty_registry_reports_no_backend(registry: JobRegistry) -> None:
    snapshot = read_snapshot(registry, NOW)
    assert snapshot.jobs == ()
    assert build_report(snapshot, MON).backends == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12h", NOW - timedelta(hours=12)),
        ("7d", NOW - timedelta(days=7)),
        ("2w", NOW - timedelta(days=14)),
        ("2026-11-30", MON),
        ("2026-11-30T08:00:00Z", MON + timedelta(hours=8)),
    ],
)
def test_since_reads_durations_dates_and_times(text: str, expected: datetime) -> None:
    assert parse_since(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "7x", "0d", "2027-01-01", "-3d"])
def test_a_bad_since_says_what_is_allowed(text: str) -> None:
    with pytest.raises(ValueError, match=r"12h, 7d, 2w"):
        parse_since(text, NOW)


def test_gpus_come_from_the_nodes_when_the_job_declared_none(registry: JobRegistry) -> None:
    # Given two jobs without requested_gpus running 2 h: one on two 4-GPU nodes, one on a node of unknown size
    for name, sizes in (("known", (4, 4)), ("unknown", (None,))):
        nodes = tuple(NodeRef(node_id=f"n{i}", kind=NodeKind.HOST, gpus=gpus) for i, gpus in enumerate(sizes))
        for status, at in ((JobStatus.RUNNING, MON), (JobStatus.SUCCEEDED, MON + timedelta(hours=2))):
            registry.apply_observation(
                JobObservation(
                    backend=Backend.SAGEMAKER,
                    native_id=name,
                    name=name,
                    block=parse_block({"priority_derivation_profile": "training-policy"}),
                    status=status,
                    event_time=at,
                    submitted_at=MON,
                    nodes=nodes,
                )
            )
    # Then the first counts 8 GPUs for 2 h, and the second's 2 h are reported as of unknown size
    (week,) = _backend(_report(registry, MON), "sagemaker")["weeks"]
    assert (week["gpu_hours"], week["unknown_gpu_job_hours"]) == (16.0, 2.0)


def test_a_shadow_decision_reorders_only_past_jobs_still_alive_in_its_pool() -> None:
    # Given three jobs of one queue in shadow mode: Y finishes at 03:00 holding 60, and a job of another queue
    minute = timedelta(minutes=1)

    def job(name: str, end: datetime | None, queue: str = QUEUE) -> JobRecord:
        finished = end is not None
        return JobRecord(
            backend=Backend.BATCH,
            native_id=name,
            name=name,
            block=parse_block({"priority_derivation_profile": "training-policy"}),
            status=JobStatus.SUCCEEDED if finished else JobStatus.PENDING,
            status_time=end or MON,
            submitted_at=MON,
            job_queue=queue,
        )

    def shadow(*moves: tuple[int, int]) -> tuple[dict[str, Any], ...]:
        return tuple(
            {"recorded_at": (MON + hours * 60 * minute).isoformat(), "outcome": SHADOW_OUTCOME, "priority": p}
            for hours, p in moves
        )

    trails = (
        JobTrail(job("x", None), applies=shadow((0, 40))),  # first: nobody to pass
        JobTrail(
            job("y", MON + 3 * 60 * minute), applies=shadow((1, 60), (6, 90))
        ),  # passes x; 06:00 after its end
        JobTrail(
            job("z", None), applies=shadow((2, 30), (4, 70), (5, 45))
        ),  # 30: passes none; 70: x; 45: none
        JobTrail(job("other", None, queue="another-queue"), applies=shadow((4, 50))),  # alone in its pool
    )
    # When the report counts them
    (batch,) = build_report(Snapshot(trails, NOW), MON).backends
    (week,) = batch.rows
    # Then 2 of the 7 reorder: y's 60 no longer counts once y finished, and the other queue's 50 is not z's
    # competitor, so z's 70 -> 45 passes nobody (x holds 40)
    assert (week.figures.shadow_decisions, week.figures.shadow_order_changes) == (7, 2)


def test_the_report_reads_the_outcomes_the_apply_step_records() -> None:
    """Given the registry's own apply outcomes, the report's constants are the same strings (one meaning)."""
    from osprey.report import SHADOW_OUTCOME  # noqa: PLC0415
    from osprey.report.model import APPLIED_OUTCOME  # noqa: PLC0415
    from osprey_control.registry.history import APPLIED, SHADOW  # noqa: PLC0415

    assert (APPLIED_OUTCOME, SHADOW_OUTCOME) == (APPLIED, SHADOW)
