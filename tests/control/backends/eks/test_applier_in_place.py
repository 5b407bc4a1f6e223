"""A value already in place is success (issue 28 item 5): a PATCH that landed but whose answer was lost is
retried by the client into a 409; the applier re-reads, finds the value it wanted and must report it
applied, so the apply step records ``applied_priority`` instead of a permanent failure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from osprey_control.backends import Outcome, PriorityChange
from osprey_control.backends.eks import EksApplier, KubernetesClient
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobRecord, JobStatus
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import KUEUE, add_job, add_workload

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads"
JOBS = "/apis/batch/v1/namespaces/ml/jobs"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _change(native_id: str, priority: int, applied: int | None) -> PriorityChange:
    record = JobRecord(
        backend=Backend.EKS,
        native_id=native_id,
        name=native_id.rpartition("/")[2],
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=JobStatus.RUNNING,
        status_time=NOW,
        applied_priority=applied,
        cluster="gpu",
    )
    return PriorityChange(record, priority)


def test_a_patch_whose_answer_was_lost_and_retried_into_a_409_is_applied(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a Workload at 400 (Osprey 40, what the registry records applied) whose next PATCH lands but whose
    # answer is lost: the client retries it with the same resourceVersion, which now answers 409
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=400)
    name = workload["metadata"]["name"]
    fake_k8s.lose_answer("PATCH", f"{WORKLOADS}/{name}")
    # When Osprey applies 50
    report = EksApplier(lambda cluster: k8s_client).apply([_change("ml/train", 50, applied=40)])
    # Then the cluster holds 500 after one PATCH landed, the retry was refused, and the re-read shows it
    assert fake_k8s.stored(KUEUE, "workloads", "ml", name)["spec"]["priority"] == 500
    assert fake_k8s.writes() == [f"{WORKLOADS}/{name}"] * 2
    # And the job is reported applied at 50 (what the apply step records as applied_priority), not skipped
    [result] = report.results
    assert (result.outcome, result.priority, result.native_value) == (Outcome.APPLIED, 50, "500")
    assert result.reason.startswith("already set")
    assert f"workload ml/{name}" in result.reason


def test_an_annotation_whose_answer_was_lost_is_applied(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a job without Kueue whose annotation PATCH lands but whose answer is lost
    fake_k8s.kueue_versions = ()
    add_job(fake_k8s, "plain", annotations={"osprey.aws/derived-priority": "40"})
    fake_k8s.lose_answer("PATCH", f"{JOBS}/plain")
    # When Osprey applies 50
    [result] = EksApplier(lambda cluster: k8s_client).apply([_change("ml/plain", 50, applied=40)]).results
    # Then the annotation holds 50 and the job is reported applied
    annotations = fake_k8s.stored("batch/v1", "jobs", "ml", "plain")["metadata"]["annotations"]
    assert annotations["osprey.aws/derived-priority"] == "50"
    assert (result.outcome, result.priority) == (Outcome.APPLIED, 50)
    assert result.reason.startswith("already set")


@pytest.mark.parametrize("applied", [None, 10, 90])
@pytest.mark.parametrize("priority", [0, 37, 60, 100])
def test_whatever_the_registry_believes_a_value_in_place_is_applied(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient, priority: int, applied: int | None
) -> None:
    # Given a Workload and an annotated job that already hold the value of ``priority`` while the registry
    # records another one applied (a lost answer or a lost registry write of an earlier cycle)
    job = add_job(fake_k8s, "train")
    add_workload(fake_k8s, job, priority=priority * 10)
    add_job(fake_k8s, "plain", annotations={"osprey.aws/derived-priority": str(priority)})
    workload_job = add_job(fake_k8s, "other")
    add_workload(fake_k8s, workload_job, priority=priority * 10)
    # When ``priority`` is applied
    report = EksApplier(lambda cluster: k8s_client).apply(
        [_change(native_id, priority, applied) for native_id in ("ml/train", "ml/plain", "ml/other")]
    )
    # Then nothing is written, and every job is applied at ``priority`` (never skipped, never failed)
    assert fake_k8s.writes() == []
    assert {(r.outcome, r.priority) for r in report.results} == {(Outcome.APPLIED, priority)}
    assert report.writes == 0
