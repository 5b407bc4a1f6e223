"""Applying priorities: Kueue Workload patch with conflict retry, the annotation fallback, isolation."""

from __future__ import annotations

import pytest

from osprey_control.backends.eks import (
    ConflictError,
    EksPriorityApplier,
    KubernetesClient,
    KueuePriorityRange,
    PriorityTarget,
    discover,
)
from osprey_control.backends.eks.applier import ApplyOutcome, ApplyReport
from osprey_control.registry.model import Backend
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import KUEUE, add_job, add_pytorchjob, add_workload

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads"


def _outcomes(report: ApplyReport) -> dict[str, tuple[ApplyOutcome, str]]:
    return {r.native_id: (r.outcome, r.reason) for r in report.results}


def test_workload_priority_is_patched_with_the_mapped_value(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a Kueue-managed Job whose Workload has priority 100
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=100)
    # When Osprey applies priority 73 (default range 0..1000)
    report = EksPriorityApplier(k8s_client, "gpu").apply([PriorityTarget("ml", "train", 73)])
    # Then the Workload's spec.priority is 730, written once, as a conditional merge-patch
    [result] = report.results
    assert (result.outcome, result.kubernetes_value) == (ApplyOutcome.APPLIED, 730)
    stored = fake_k8s.stored(KUEUE, "workloads", "ml", workload["metadata"]["name"])
    assert stored["spec"]["priority"] == 730
    assert stored["spec"]["queueName"] == "team-a"  # merge-patch kept the rest of the spec
    assert int(stored["metadata"]["resourceVersion"]) > int(workload["metadata"]["resourceVersion"])
    assert fake_k8s.writes() == [f"{WORKLOADS}/{workload['metadata']['name']}"]
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
    report = EksPriorityApplier(k8s_client, "gpu").apply([PriorityTarget("ml", "train", 50)])
    # Then the Workload was re-read and patched again, successfully
    assert report.results[0].outcome is ApplyOutcome.APPLIED
    assert fake_k8s.requests.count(("GET", path)) == 1
    assert fake_k8s.writes() == [path, path]
    assert fake_k8s.stored(KUEUE, "workloads", "ml", workload["metadata"]["name"])["spec"]["priority"] == 500


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
    report = EksPriorityApplier(k8s_client, "gpu", max_conflict_attempts=3).apply(
        [PriorityTarget("ml", "train", 9)]
    )
    [result] = report.results
    assert result.outcome is ApplyOutcome.FAILED
    assert "gave up after 3 attempts" in result.reason
    assert len(fake_k8s.writes()) == 3
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
    [result] = EksPriorityApplier(k8s_client, "gpu").apply([PriorityTarget("ml", "train", 9)]).results
    # Then the job fails, transient exactly when the server may answer differently later
    assert (result.outcome, result.transient) == (ApplyOutcome.FAILED, transient)


def test_without_kueue_the_job_is_annotated(fake_k8s: FakeKubernetes, k8s_client: KubernetesClient) -> None:
    # Given a cluster without Kueue and a labelled PyTorchJob
    fake_k8s.kueue_versions = ()
    add_pytorchjob(fake_k8s, "pt", [])
    # When the priority is applied (kind unknown to the caller)
    report = EksPriorityApplier(k8s_client, "gpu").apply([PriorityTarget.from_native_id("ml/pt", 42)])
    # Then osprey.aws/derived-priority is set and the existing annotations kept
    assert report.results[0].outcome is ApplyOutcome.APPLIED
    annotations = fake_k8s.stored("kubeflow.org/v1", "pytorchjobs", "ml", "pt")["metadata"]["annotations"]
    assert annotations == {"osprey.aws/co-schedule": "true", "osprey.aws/derived-priority": "42"}
    assert report.kueue_version is None


def test_only_changed_priorities_are_written(fake_k8s: FakeKubernetes, k8s_client: KubernetesClient) -> None:
    # Given a Workload already at 600 and an annotated job (no Workload) already at 10
    job = add_job(fake_k8s, "train")
    add_workload(fake_k8s, job, priority=600)
    add_job(fake_k8s, "plain", annotations={"osprey.aws/derived-priority": "10"})
    # When the same priorities are applied again
    report = EksPriorityApplier(k8s_client, "gpu").apply(
        [PriorityTarget("ml", "train", 60, kind="Job"), PriorityTarget("ml", "plain", 10, kind="job")]
    )
    # Then nothing is written and both are reported unchanged
    assert fake_k8s.writes() == []
    assert _outcomes(report) == {
        "ml/train": (ApplyOutcome.SKIPPED, "unchanged"), "ml/plain": (ApplyOutcome.SKIPPED, "unchanged")}  # fmt: skip


def test_objects_without_the_osprey_label_are_never_written(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given an unlabelled Job that Kueue manages
    job = add_job(fake_k8s, "foreign", labels={"team": "a"})
    add_workload(fake_k8s, job, priority=5)
    # When Osprey is asked to set its priority
    report = EksPriorityApplier(k8s_client, "gpu").apply([PriorityTarget("ml", "foreign", 90)])
    # Then it is skipped and nothing is written
    assert report.results[0].outcome is ApplyOutcome.SKIPPED
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
    report = EksPriorityApplier(k8s_client, "gpu").apply(
        [PriorityTarget("ml", n, 20) for n in ("a", "b", "gone", "c")]
    )
    # Then a and c are applied, b and the missing job fail with a reason, and the report says so
    outcomes = _outcomes(report)
    assert outcomes["ml/a"][0] is ApplyOutcome.APPLIED
    assert outcomes["ml/c"][0] is ApplyOutcome.APPLIED
    assert outcomes["ml/b"][0] is ApplyOutcome.FAILED
    assert "HTTP 500" in outcomes["ml/b"][1]
    assert outcomes["ml/gone"][0] is ApplyOutcome.FAILED
    assert "deleted or never existed" in outcomes["ml/gone"][1]
    assert report.to_dict()["applied"] == 2
    assert report.to_dict()["failed"] == 2


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


def test_targets_come_from_registry_records_of_eks_jobs_only(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a discovered job turned into a registry record
    add_job(fake_k8s, "train")
    fake_k8s.kueue_versions = ()
    [obs] = discover(k8s_client, "gpu", include_pods=False).observations
    record = obs.to_record()
    # When a target is built from it, Then it addresses the same object and the annotation lands there
    target = PriorityTarget.from_record(record, 33, kind=obs.kind)
    assert (target.namespace, target.name) == ("ml", "train")
    EksPriorityApplier(k8s_client, "gpu").apply([target])
    assert fake_k8s.stored("batch/v1", "jobs", "ml", "train")["metadata"]["annotations"] == {
        "osprey.aws/derived-priority": "33"
    }
    # And a record of another backend is refused with the applier to use instead
    with pytest.raises(ValueError, match="use the batch applier"):
        PriorityTarget.from_record(record.model_copy(update={"backend": Backend.BATCH}), 33)
