"""Job identity on real clusters (issue 28, item 4), through the discovery Lambda's logic against fake API servers
and the registry in moto: two clusters' ``ml/train`` are two jobs; a Job deleted and re-created under its name is
another job; a Job deleted before discovery saw it finish is closed after the grace period, with the reason in
its history; a failed listing closes nothing; records under the old key format are closed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.backends.eks import KubernetesClient
from osprey_control.backends.eks.discovery_run import run_discovery
from osprey_control.backends.eks.settings import EksDiscoveryEnvironment
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.backends.eks.fake_k8s import FakeKubernetes, run_fake
from tests.control.backends.eks.objects import add_job

T0 = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
GRACE = timedelta(minutes=5)
RUNNING = {"active": 1, "ready": 1, "startTime": "2026-01-01T00:02:00Z"}
JOBS = "/apis/batch/v1/jobs"


@pytest.fixture
def registry() -> Iterator[JobRegistry]:
    with mock_aws():
        registry = JobRegistry(
            "osprey-jobs", client=boto3.client("dynamodb", region_name="us-east-1"), shards=2
        )
        registry.create_table()
        yield registry


@pytest.fixture
def second_k8s() -> Iterator[FakeKubernetes]:
    yield from run_fake(FakeKubernetes())


def _client(fake: FakeKubernetes) -> KubernetesClient:
    return KubernetesClient(fake.url, timeout=5, max_attempts=2, backoff=0, sleep=lambda _: None)


def _key(native_id: str) -> JobKey:
    return JobKey(Backend.EKS, native_id)


def _pass(registry: JobRegistry, clusters: dict[str, FakeKubernetes], at: datetime) -> dict[str, object]:
    env = EksDiscoveryEnvironment(cluster_names=tuple(clusters))
    return run_discovery(
        env, connector=lambda name: _client(clusters[name]), registry=registry, grace=GRACE, now=lambda: at
    )


def _record(registry: JobRegistry, native_id: str) -> JobRecord:
    record = registry.get(_key(native_id))
    assert record is not None, native_id
    return record


def test_two_clusters_jobs_of_the_same_name_are_two_jobs_and_one_ending_leaves_the_other_managed(
    fake_k8s: FakeKubernetes, second_k8s: FakeKubernetes, registry: JobRegistry
) -> None:
    # Given ml/train running on two clusters
    add_job(fake_k8s, "train", status=RUNNING)
    add_job(second_k8s, "train", status=RUNNING)
    clusters = {"gpu-a": fake_k8s, "gpu-b": second_k8s}
    # When discovery runs
    _pass(registry, clusters, T0)
    # Then there are two records, each with its cluster
    a, b = _record(registry, "gpu-a/ml/train/uid-train"), _record(registry, "gpu-b/ml/train/uid-train")
    assert (a.cluster, b.cluster) == ("gpu-a", "gpu-b")
    # When gpu-a's job finishes
    stored = fake_k8s.objects[("batch/v1", "jobs")][("ml", "train")]
    stored["status"] = {
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:50:00Z"}]
    }
    _pass(registry, clusters, T0 + timedelta(minutes=1))
    # Then only gpu-a's record ended; gpu-b's is still active and listed for the cycle
    assert _record(registry, "gpu-a/ml/train/uid-train").status is JobStatus.SUCCEEDED
    assert _record(registry, "gpu-b/ml/train/uid-train").status is JobStatus.RUNNING
    assert [r.cluster for r in registry.list_active(backend=Backend.EKS)] == ["gpu-b"]


def test_a_job_deleted_and_re_created_under_its_name_is_a_new_job(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient, registry: JobRegistry
) -> None:
    # Given ml/train recorded, then finished
    add_job(fake_k8s, "train", status=RUNNING)
    clusters = {"gpu": fake_k8s}
    _pass(registry, clusters, T0)
    # When it is deleted and a new ml/train (another uid) is submitted, pending
    fake_k8s.delete("batch/v1", "jobs", "ml", "train")
    fake_k8s.add("batch/v1", "jobs", {"kind": "Job", "metadata": {
        "name": "train", "namespace": "ml", "uid": "uid-train-2", "labels": {"osprey.aws/enabled": "true",
        "osprey.aws/policy": "training-policy"}}, "spec": {"suspend": True}, "status": {}})  # fmt: skip
    _pass(registry, clusters, T0 + timedelta(minutes=1))
    # Then the new job has its own record, pending and managed
    new = _record(registry, "gpu/ml/train/uid-train-2")
    assert new.status is JobStatus.PENDING
    assert new.active
    # And the old one is missing, then closed after the grace period
    assert _record(registry, "gpu/ml/train/uid-train").missing_since == T0 + timedelta(minutes=1)
    _pass(registry, clusters, T0 + timedelta(minutes=1) + GRACE)
    assert _record(registry, "gpu/ml/train/uid-train").status is JobStatus.STOPPED
    assert [r.native_id for r in registry.list_active(backend=Backend.EKS)] == ["gpu/ml/train/uid-train-2"]


def test_a_job_deleted_before_discovery_saw_it_finish_is_closed_after_the_grace_period_with_the_reason(
    fake_k8s: FakeKubernetes, registry: JobRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a running job, recorded
    add_job(fake_k8s, "train", status=RUNNING)
    clusters = {"gpu": fake_k8s}
    _pass(registry, clusters, T0)
    native = "gpu/ml/train/uid-train"
    # When it finishes and ttlSecondsAfterFinished deletes it before the next pass
    fake_k8s.delete("batch/v1", "jobs", "ml", "train")
    first = _pass(registry, clusters, T0 + timedelta(minutes=1))
    # Then it is marked missing but still active within the grace period
    record = _record(registry, native)
    assert (record.status, record.missing_since) == (JobStatus.RUNNING, T0 + timedelta(minutes=1))
    assert first["clusters"][0]["reconciled"]["missing"] == 1  # type: ignore[index]
    _pass(registry, clusters, T0 + timedelta(minutes=3))
    assert _record(registry, native).active
    # When the grace period has passed
    last = _pass(registry, clusters, T0 + timedelta(minutes=1) + GRACE)
    # Then it is closed, dated when it was first missed, and its history says why
    closed = _record(registry, native)
    assert (closed.status, closed.status_time) == (JobStatus.STOPPED, T0 + timedelta(minutes=1))
    assert not closed.allocations.marks[-1].running
    assert last["clusters"][0]["reconciled"]["closed"] == 1  # type: ignore[index]
    [note] = registry.events.status_events(_key(native))
    assert note["status"] == "STOPPED"
    assert "has not listed it since" in note["reason"]
    assert "ttlSecondsAfterFinished" in note["reason"]
    # And `osprey history` shows it as the job's last event
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    shown = CliRunner().invoke(app, ["history", f"eks#{native}", "--table", "osprey-jobs", "--json"])
    assert shown.exit_code == 0, shown.output
    last = json.loads(shown.stdout)["events"][-1]
    assert (last["event"], last["status"]) == ("closed", "STOPPED")
    assert last["detail"] == note["reason"]


def test_a_failed_or_partial_listing_closes_nothing(fake_k8s: FakeKubernetes, registry: JobRegistry) -> None:
    # Given a running job recorded, then deleted
    add_job(fake_k8s, "train", status=RUNNING)
    clusters = {"gpu": fake_k8s}
    _pass(registry, clusters, T0)
    fake_k8s.delete("batch/v1", "jobs", "ml", "train")
    # When every later listing of the cluster fails (the Jobs list answers 500), for longer than the grace period
    fake_k8s.fail("GET", JOBS, 500, times=99)
    for minutes in (1, 10, 20):
        result = _pass(registry, clusters, T0 + timedelta(minutes=minutes))
        assert "error" in result["clusters"][0]  # type: ignore[index]
    # Then the job was neither marked missing nor closed
    record = _record(registry, "gpu/ml/train/uid-train")
    assert (record.status, record.missing_since) == (JobStatus.RUNNING, None)


def test_a_job_seen_again_within_the_grace_period_is_not_closed(
    fake_k8s: FakeKubernetes, registry: JobRegistry
) -> None:
    add_job(fake_k8s, "train", status=RUNNING)
    clusters = {"gpu": fake_k8s}
    _pass(registry, clusters, T0)
    saved = fake_k8s.objects[("batch/v1", "jobs")].pop(("ml", "train"))
    _pass(registry, clusters, T0 + timedelta(minutes=1))
    fake_k8s.objects[("batch/v1", "jobs")][("ml", "train")] = saved
    _pass(registry, clusters, T0 + timedelta(minutes=2))
    _pass(registry, clusters, T0 + timedelta(minutes=30))
    record = _record(registry, "gpu/ml/train/uid-train")
    assert (record.status, record.missing_since) == (JobStatus.RUNNING, None)


def test_a_record_under_the_old_key_format_is_closed_and_the_job_continues_under_its_new_key(
    fake_k8s: FakeKubernetes, registry: JobRegistry
) -> None:
    # Given a record written before keys named the cluster and uid (native id ml/train)
    old = JobRecord(
        backend=Backend.EKS, native_id="ml/train", name="train", cluster="gpu", kind="Job",
        block=parse_block({"priority_derivation_profile": "training-policy"}), status=JobStatus.RUNNING,
        status_time=T0 - timedelta(hours=1),
    )  # fmt: skip
    assert registry.update(old.key, lambda _: old) is not None
    add_job(fake_k8s, "train", status=RUNNING)
    # When discovery runs once
    _pass(registry, {"gpu": fake_k8s}, T0)
    # Then the old record is closed at once, with the reason, and the job is active under its new key
    assert _record(registry, "ml/train").status is JobStatus.STOPPED
    [note] = registry.events.status_events(old.key)
    assert note["reason"].startswith("superseded")
    assert [r.native_id for r in registry.list_active(backend=Backend.EKS)] == ["gpu/ml/train/uid-train"]
