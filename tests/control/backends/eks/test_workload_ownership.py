"""Issue 28, item 2 on EKS: Osprey writes only the Kueue Workload its opted-in job controls, against the fake API
server (real HTTP, merge-patch, 409 on a stale resourceVersion)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from osprey_control.backends import Outcome, PriorityChange
from osprey_control.backends.eks import EksApplier, KubernetesClient
from osprey_control.backends.eks.ownership import JOB_UID_LABEL, is_owned_by
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobRecord, JobStatus
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import KUEUE, add_job, add_workload

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _change(native_id: str, priority: int) -> PriorityChange:
    record = JobRecord(
        backend=Backend.EKS,
        native_id=native_id,
        name=native_id.rpartition("/")[2],
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=JobStatus.RUNNING,
        status_time=NOW,
        applied_priority=50,
        cluster="gpu",
    )
    return PriorityChange(record, priority)


def _workload(fake: FakeKubernetes, name: str, owners: list[dict[str, Any]], **labels: str) -> dict[str, Any]:
    return fake.add(KUEUE, "workloads", {
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "ownerReferences": owners, "labels": labels},
        "spec": {"queueName": "team-a", "podSets": [], "priority": 100},
        "status": {},
    })  # fmt: skip


def _ref(job: Mapping[str, Any], *, controller: bool) -> dict[str, Any]:
    meta = job["metadata"]
    return {"apiVersion": "batch/v1", "kind": job["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": controller}  # fmt: skip


def test_a_workload_the_job_only_co_owns_is_never_written(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given an opted-in Job, and a Workload controlled by a Job that did not opt in which also lists the opted-in
    # Job among its owners (not as controller)
    train = add_job(fake_k8s, "train")
    other = add_job(fake_k8s, "other", labels={"team": "a"})
    _workload(fake_k8s, "job-other-9z9z9", [_ref(other, controller=True), _ref(train, controller=False)])
    # When Osprey applies the opted-in job's priority
    report = EksApplier(lambda cluster: k8s_client).apply([_change("ml/train", 80)])
    # Then the other job's Workload keeps its priority: Osprey wrote only the opted-in Job's own annotation
    assert fake_k8s.stored(KUEUE, "workloads", "ml", "job-other-9z9z9")["spec"]["priority"] == 100
    assert fake_k8s.writes() == ["/apis/batch/v1/namespaces/ml/jobs/train"]
    assert report.results[0].reason == "patched annotation Job ml/train"


def test_a_workload_whose_job_uid_label_names_another_job_is_never_written(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a Workload whose owner reference names the opted-in Job but whose Kueue job-uid label names another
    train = add_job(fake_k8s, "train")
    _workload(
        fake_k8s, "job-train-1a1a1", [_ref(train, controller=True)], **{JOB_UID_LABEL: "uid-someone-else"}
    )
    # When Osprey applies
    EksApplier(lambda cluster: k8s_client).apply([_change("ml/train", 80)])
    # Then that Workload is untouched
    assert fake_k8s.stored(KUEUE, "workloads", "ml", "job-train-1a1a1")["spec"]["priority"] == 100
    assert f"{WORKLOADS}/job-train-1a1a1" not in fake_k8s.writes()


class _TakeoverBeforePatch:
    """The client, but the first PATCH of a Workload finds it handed to another job first (a real 409 follows,
    since the takeover bumped its resourceVersion)."""

    def __init__(self, client: KubernetesClient, takeover: Any) -> None:
        self._client, self._takeover = client, takeover

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        if self._takeover is not None:
            self._takeover, takeover = None, self._takeover
            takeover()
        return self._client.merge_patch(path, patch)


def test_a_workload_that_changed_owners_before_the_retried_patch_is_not_written(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given an opted-in Job's Workload, which is handed to a Job that did not opt in between Osprey's read and
    # its patch
    train = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, train, priority=100)
    name = workload["metadata"]["name"]
    other = add_job(fake_k8s, "other", labels={"team": "a"})

    def takeover() -> None:
        fake_k8s.add(KUEUE, "workloads", {**workload, "metadata": {
            **workload["metadata"], "ownerReferences": [_ref(other, controller=True)]}})  # fmt: skip

    client = _TakeoverBeforePatch(k8s_client, takeover)
    # When Osprey applies (its first patch gets 409, it re-reads)
    report = EksApplier(lambda cluster: client).apply([_change("ml/train", 80)])  # type: ignore[arg-type, return-value]
    # Then it does not patch the re-read Workload, and says why
    assert fake_k8s.stored(KUEUE, "workloads", "ml", name)["spec"]["priority"] == 100
    assert report.results[0].outcome is Outcome.SKIPPED
    assert "no longer controlled by the job" in report.results[0].reason
    assert report.writes == 0


def test_ownership_needs_the_one_controller_with_uid_kind_and_name() -> None:
    job = {"kind": "Job", "metadata": {"name": "train", "uid": "u-1"}}
    ref = {"kind": "Job", "name": "train", "uid": "u-1", "controller": True}
    assert is_owned_by({"metadata": {"ownerReferences": [ref]}}, job)
    assert not is_owned_by({"metadata": {"ownerReferences": [{**ref, "controller": False}]}}, job)
    assert not is_owned_by({"metadata": {"ownerReferences": [{**ref, "kind": "JobSet"}]}}, job)
    assert not is_owned_by({"metadata": {"ownerReferences": [{**ref, "name": "train-2"}]}}, job)
    assert not is_owned_by({"metadata": {"ownerReferences": [{**ref, "uid": "u-2"}]}}, job)
    assert not is_owned_by({"metadata": {"ownerReferences": [ref, {**ref, "uid": "u-2"}]}}, job)
    assert not is_owned_by(
        {"metadata": {"ownerReferences": [ref]}}, {"kind": "Job", "metadata": {"name": "train"}}
    )
