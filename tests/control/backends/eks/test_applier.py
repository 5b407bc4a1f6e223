"""Applying priorities: Kueue Workload patch with conflict retry, the annotation fallback, isolation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from osprey_control.backends import ApplyReport, Outcome, PriorityChange
from osprey_control.backends.eks import (
    ConflictError,
    EksApplier,
    KubernetesClient,
    KueuePriorityRange,
    discover,
)
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import KUEUE, add_job, add_pytorchjob, add_workload

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _change(
    native_id: str, priority: int, *, applied: int | None = None, cluster: str | None = "gpu"
) -> PriorityChange:
    """The cycle's decision for an EKS job (``applied``: the priority the registry says is in force)."""
    record = JobRecord(
        backend=Backend.EKS,
        native_id=native_id,
        name=native_id.rpartition("/")[2],
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=JobStatus.RUNNING,
        status_time=NOW,
        applied_priority=applied,
        cluster=cluster,
    )
    return PriorityChange(record, priority)


def _apply(client: KubernetesClient, *changes: PriorityChange, **options: Any) -> ApplyReport:
    """Apply ``changes`` with every cluster answering through ``client`` (the fake API server)."""
    return EksApplier(lambda cluster: client, **options).apply(changes)


def _outcomes(report: ApplyReport) -> dict[str, tuple[Outcome, str]]:
    return {r.job.native_id: (r.outcome, r.reason) for r in report.results}


def test_workload_priority_is_patched_with_the_mapped_value(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a Kueue-managed Job whose Workload has priority 100
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=100)
    name = workload["metadata"]["name"]
    # When Osprey applies priority 73 (default range 0..1000)
    report = _apply(k8s_client, _change("ml/train", 73))
    # Then the Workload's spec.priority is 730, written once, as a conditional merge-patch
    [result] = report.results
    assert (result.job, result.outcome, result.native_value) == (
        JobKey(Backend.EKS, "ml/train"), Outcome.APPLIED, "730")  # fmt: skip
    assert result.reason == f"patched workload ml/{name}"
    assert report.writes == 1
    stored = fake_k8s.stored(KUEUE, "workloads", "ml", name)
    assert stored["spec"]["priority"] == 730
    assert stored["spec"]["queueName"] == "team-a"  # merge-patch kept the rest of the spec
    assert int(stored["metadata"]["resourceVersion"]) > int(workload["metadata"]["resourceVersion"])
    assert fake_k8s.writes() == [f"{WORKLOADS}/{name}"]
    # And the job object itself is untouched
    assert "annotations" not in fake_k8s.stored("batch/v1", "jobs", "ml", "train")["metadata"]


def test_a_conflict_is_retried_after_re_reading(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given the Workload patch answers 409 once (someone else wrote in between)
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=100)
    path = f"{WORKLOADS}/{workload['metadata']['name']}"
    fake_k8s.fail("PATCH", path, 409)
    # When the priority is applied
    report = _apply(k8s_client, _change("ml/train", 50))
    # Then the Workload was re-read and patched again, successfully
    assert report.results[0].outcome is Outcome.APPLIED
    assert fake_k8s.requests.count(("GET", path)) == 1
    assert fake_k8s.writes() == [path, path]
    assert fake_k8s.stored(KUEUE, "workloads", "ml", workload["metadata"]["name"])["spec"]["priority"] == 500
    # ... and the report counts the one PATCH that landed
    assert report.writes == 1


def test_a_real_stale_resource_version_gets_409_and_converges(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a Workload changed by another writer after Osprey's client read it
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=100)
    name = workload["metadata"]["name"]
    path = f"{WORKLOADS}/{name}"
    k8s_client.merge_patch(path, {"metadata": {"labels": {"touched": "yes"}}})
    # When Osprey patches with the old resourceVersion, Then the fake server refuses it
    stale = {
        "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
        "spec": {"priority": 1},
    }
    with pytest.raises(ConflictError):
        k8s_client.merge_patch(path, stale)


def test_conflicts_that_never_stop_fail_that_job_after_bounded_attempts(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=100)
    fake_k8s.fail("PATCH", f"{WORKLOADS}/{workload['metadata']['name']}", 409, times=99)
    report = _apply(k8s_client, _change("ml/train", 9), max_conflict_attempts=3)
    [result] = report.results
    assert result.outcome is Outcome.FAILED
    assert "gave up after 3 attempts" in result.reason
    assert len(fake_k8s.writes()) == 3
    assert report.writes == 0
    # A race is worth another try next cycle (the apply step retries transient failures)
    assert result.transient is True


@pytest.mark.parametrize(("status", "transient"), [(503, True), (429, True), (422, False), (403, False)])
def test_the_clients_classification_decides_whether_a_failed_write_is_retried(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient, status: int, transient: bool
) -> None:
    # Given the Workload patch keeps answering ``status``
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=100)
    fake_k8s.fail("PATCH", f"{WORKLOADS}/{workload['metadata']['name']}", status, times=99)
    # When the priority is applied
    [result] = _apply(k8s_client, _change("ml/train", 9)).results
    # Then the job fails, transient exactly when the server may answer differently later
    assert (result.outcome, result.transient) == (Outcome.FAILED, transient)


def test_without_kueue_the_job_is_annotated(fake_k8s: FakeKubernetes, k8s_client: KubernetesClient) -> None:
    # Given a cluster without Kueue and a labelled PyTorchJob
    fake_k8s.kueue_versions = ()
    add_pytorchjob(fake_k8s, "pt", [])
    # When the priority is applied (each job kind is tried in turn)
    report = _apply(k8s_client, _change("ml/pt", 42))
    # Then osprey.aws/derived-priority is set and the existing annotations kept
    [result] = report.results
    assert (result.outcome, result.reason) == (Outcome.APPLIED, "patched annotation PyTorchJob ml/pt")
    assert result.native_value is None  # no Kueue value: the annotation holds the Osprey priority itself
    assert report.writes == 1
    annotations = fake_k8s.stored("kubeflow.org/v1", "pytorchjobs", "ml", "pt")["metadata"]["annotations"]
    assert annotations == {"osprey.aws/co-schedule": "true", "osprey.aws/derived-priority": "42"}


def test_only_changed_priorities_are_written(fake_k8s: FakeKubernetes, k8s_client: KubernetesClient) -> None:
    # Given a Workload already at 600 and an annotated job (no Workload) already at 10
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=600)
    add_job(fake_k8s, "plain", annotations={"osprey.aws/derived-priority": "10"})
    # When the same priorities are applied again (the registry does not know they are in force)
    report = _apply(k8s_client, _change("ml/train", 60), _change("ml/plain", 10))
    # Then nothing is written and both are reported applied (already set), with what holds the value
    assert fake_k8s.writes() == []
    assert report.writes == 0
    assert _outcomes(report) == {
        "ml/train": (Outcome.APPLIED, f"already set: workload ml/{workload['metadata']['name']}"),
        "ml/plain": (Outcome.APPLIED, "already set: annotation Job ml/plain"),
    }


def test_objects_without_the_osprey_label_are_never_written(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given an unlabelled Job that Kueue manages
    job = add_job(fake_k8s, "foreign", labels={"team": "a"})
    add_workload(fake_k8s, job, priority=5)
    # When Osprey is asked to set its priority
    report = _apply(k8s_client, _change("ml/foreign", 90))
    # Then it is skipped and nothing is written
    assert report.results[0].outcome is Outcome.SKIPPED
    assert "osprey.aws/enabled" in report.results[0].reason
    assert fake_k8s.writes() == []


def test_a_500_on_one_job_does_not_stop_the_others(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given three jobs, the second's Workload patch failing with 500 on every retry, and one missing job
    jobs = {name: add_job(fake_k8s, name) for name in ("a", "b", "c")}
    workloads = {name: add_workload(fake_k8s, job) for name, job in jobs.items()}
    fake_k8s.fail("PATCH", f"{WORKLOADS}/{workloads['b']['metadata']['name']}", 500, times=99)
    # When all are applied
    report = _apply(k8s_client, *(_change(f"ml/{n}", 20) for n in ("a", "b", "gone", "c")))
    # Then a and c are applied, b and the missing job fail with a reason, and the report says so
    outcomes = _outcomes(report)
    assert outcomes["ml/a"][0] is Outcome.APPLIED
    assert outcomes["ml/c"][0] is Outcome.APPLIED
    assert outcomes["ml/b"][0] is Outcome.FAILED
    assert "HTTP 500" in outcomes["ml/b"][1]
    assert outcomes["ml/gone"][0] is Outcome.FAILED
    assert "deleted or never existed" in outcomes["ml/gone"][1]
    assert (len(report.applied), len(report.failed), report.writes) == (2, 2, 2)


def test_a_cluster_that_cannot_be_reached_fails_only_its_own_jobs(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a job on a reachable cluster, one on a cluster whose API server does not answer, one with no cluster
    add_job(fake_k8s, "train")
    fake_k8s.kueue_versions = ()

    def connect(cluster: str) -> KubernetesClient:
        if cluster == "down":
            raise ConnectionError(f"{cluster}: no route to the API server")
        return k8s_client

    # When all are applied
    report = EksApplier(connect).apply(
        [
            _change("ml/train", 30),
            _change("ml/other", 30, cluster="down"),
            _change("ml/lost", 30, cluster=None),
        ]
    )
    # Then the reachable cluster's job is written, and each of the others fails with its own reason
    outcomes = _outcomes(report)
    assert outcomes["ml/train"][0] is Outcome.APPLIED
    assert outcomes["ml/other"] == (
        Outcome.FAILED,
        "cluster down: ConnectionError: down: no route to the API server",
    )
    assert outcomes["ml/lost"] == (Outcome.FAILED, "EKS job without a cluster")
    assert report.by_job()[JobKey(Backend.EKS, "ml/other")].transient is True  # the next cycle tries again
    assert fake_k8s.stored("batch/v1", "jobs", "ml", "train")["metadata"]["annotations"] == {
        "osprey.aws/derived-priority": "30"
    }


def test_kueue_is_detected_on_every_call(fake_k8s: FakeKubernetes, k8s_client: KubernetesClient) -> None:
    # Given a cluster without Kueue: the job is annotated
    fake_k8s.kueue_versions = ()
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=100)
    assert _apply(k8s_client, _change("ml/train", 40)).results[0].reason == "patched annotation Job ml/train"
    # When Kueue is installed before the next cycle
    fake_k8s.kueue_versions = ("v1beta1",)
    [result] = _apply(k8s_client, _change("ml/train", 70, applied=40)).results
    # Then the same applier kind writes the Workload this time
    assert (result.outcome, result.native_value) == (Outcome.APPLIED, "700")
    assert fake_k8s.stored(KUEUE, "workloads", "ml", workload["metadata"]["name"])["spec"]["priority"] == 700


def test_a_failed_kueue_detection_fails_that_clusters_jobs_without_writing(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a cluster whose Kueue API discovery keeps answering 503
    for name in ("a", "b"):
        add_workload(fake_k8s, add_job(fake_k8s, name))
    fake_k8s.fail("GET", "/apis/kueue.x-k8s.io", 503, times=99)
    # When its jobs are applied
    report = _apply(k8s_client, _change("ml/a", 20), _change("ml/b", 20))
    # Then both fail, transiently, and nothing is written (the annotation would be wrong under Kueue)
    assert [(r.outcome, r.transient) for r in report.results] == [(Outcome.FAILED, True)] * 2
    assert all(r.reason.startswith("Kueue API discovery failed") for r in report.results)
    assert fake_k8s.writes() == []


def test_a_malformed_job_id_fails_only_that_job(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    fake_k8s.kueue_versions = ()
    add_job(fake_k8s, "train")
    outcomes = _outcomes(_apply(k8s_client, _change("no-namespace", 20), _change("ml/train", 20)))
    assert outcomes["no-namespace"] == (
        Outcome.FAILED,
        "an EKS native id is '<cluster>/<namespace>/<name>/<uid>' (or the legacy '<namespace>/<name>'), "
        "got 'no-namespace'",
    )
    assert outcomes["ml/train"][0] is Outcome.APPLIED


@pytest.mark.parametrize(("priority", "expected"), [(0, 0), (1, 10), (50, 500), (100, 1000)])
def test_default_mapping_is_linear_onto_0_to_1000(priority: int, expected: int) -> None:
    assert KueuePriorityRange().map(priority) == expected


def test_custom_range_is_monotonic_and_rejects_bad_input() -> None:
    band = KueuePriorityRange(low=1000, high=1099)
    values = [band.map(p) for p in range(101)]
    assert values[0] == 1000
    assert values[-1] == 1099
    assert values == sorted(values)
    with pytest.raises(ValueError, match=r"0\.\.100"):
        band.map(101)
    with pytest.raises(ValueError, match="low < high"):
        KueuePriorityRange(low=5, high=5)


def test_a_custom_range_is_what_the_workload_gets(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=100)
    report = _apply(
        k8s_client, _change("ml/train", 50), priority_range=KueuePriorityRange(low=1000, high=1100)
    )
    assert report.results[0].native_value == "1050"
    assert fake_k8s.stored(KUEUE, "workloads", "ml", workload["metadata"]["name"])["spec"]["priority"] == 1050


def test_registry_records_of_discovered_eks_jobs_are_applied_and_others_skipped(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a discovered job turned into a registry record
    add_job(fake_k8s, "train")
    fake_k8s.kueue_versions = ()
    [obs] = discover(k8s_client, "gpu", include_pods=False).observations
    record = obs.to_record()
    # When its priority is applied, Then it addresses the same object and the annotation lands there
    [result] = EksApplier(lambda cluster: k8s_client).apply([PriorityChange(record, 33)]).results
    assert (result.job, result.outcome) == (record.key, Outcome.APPLIED)
    assert fake_k8s.stored("batch/v1", "jobs", "ml", "train")["metadata"]["annotations"] == {
        "osprey.aws/derived-priority": "33"
    }
    # And a record of another backend is skipped without a call to the cluster
    requests = len(fake_k8s.requests)
    batch = record.model_copy(update={"backend": Backend.BATCH})
    [other] = EksApplier(lambda cluster: k8s_client).apply([PriorityChange(batch, 33)]).results
    assert other.outcome is Outcome.SKIPPED
    assert len(fake_k8s.requests) == requests
