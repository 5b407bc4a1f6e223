"""Osprey's EKS client and applier against a real kube-apiserver with Kueue's CRDs and a real Kueue manager."""

from __future__ import annotations

import secrets
import time
from typing import Any

import pytest

from osprey_control.backends import Outcome
from osprey_control.backends.eks import ConflictError, EksApplier, KubernetesClient
from tests.k8s import objects
from tests.k8s.cluster import LocalKubernetes
from tests.k8s.objects import KUEUE, change


@pytest.fixture
def namespace(k8s: LocalKubernetes) -> str:
    """A namespace of this test's own, so tests never see each other's objects."""
    name = f"ml-{secrets.token_hex(3)}"
    k8s.apply_namespace(name)
    return name


def test_the_client_lists_and_patches_a_workload_on_the_real_api_server(
    k8s: LocalKubernetes, namespace: str
) -> None:
    # Given an opted-in Job (no queue: Kueue leaves it alone) and a Workload it controls, priority 100
    client: KubernetesClient = k8s.client()
    owner = objects.job(k8s, namespace, "train")
    workload = objects.owned_workload(k8s, owner, priority=100)
    path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{workload['metadata']['name']}"
    # When Osprey's client lists the namespace's Workloads by the opt-in label
    listed = list(client.list(f"/apis/{KUEUE}/namespaces/{namespace}/workloads",
                              label_selector="osprey.aws/enabled=true"))  # fmt: skip
    # Then it finds that Workload, as stored
    assert [w["metadata"]["uid"] for w in listed] == [workload["metadata"]["uid"]]
    # When the applier writes priority 73 (default range 0..1000) for the Job
    report = EksApplier(lambda cluster: client).apply([change(owner, 73)])
    # Then the API server holds spec.priority 730 on that Workload, and the rest of its spec is unchanged
    [result] = report.results
    assert (result.outcome, result.native_value, report.writes) == (Outcome.APPLIED, "730", 1), result.reason
    stored = client.get(path)
    assert stored["spec"]["priority"] == 730
    assert stored["spec"]["queueName"] == "nowhere"
    assert int(stored["metadata"]["resourceVersion"]) > int(workload["metadata"]["resourceVersion"])
    # And a patch carrying the resourceVersion read before that write is refused by the server with 409
    stale = {
        "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
        "spec": {"priority": 1},
    }
    with pytest.raises(ConflictError):
        client.merge_patch(path, stale)
    assert client.get(path)["spec"]["priority"] == 730


def test_kueue_admits_the_workload_whose_priority_osprey_wrote(k8s: LocalKubernetes, namespace: str) -> None:
    # Given Kueue's queues (BestEffortFIFO, preemption within the queue) with room for one 1-CPU job
    queue = f"cq-{namespace}"
    objects.resource_flavor(k8s, f"flavor-{namespace}")
    objects.cluster_queue(k8s, queue, cpu=1, flavor=f"flavor-{namespace}")
    objects.local_queue(k8s, namespace, "team-a", queue)
    client = k8s.client()
    # When an opted-in Job is submitted to the LocalQueue
    owner = objects.job(k8s, namespace, "train", queue="team-a")
    workloads = f"/apis/{KUEUE}/namespaces/{namespace}/workloads"
    # Then the real Kueue creates its Workload, controlled by the Job, with the opt-in label copied
    [workload] = objects.eventually(lambda: list(client.list(workloads)), "Kueue to create the Workload")
    assert workload["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
    assert workload["metadata"]["labels"]["osprey.aws/enabled"] == "true"
    # When Osprey applies priority 40 for the Job
    report = EksApplier(lambda cluster: client).apply([change(owner, 40)])
    assert report.results[0].outcome is Outcome.APPLIED, report.results[0].reason
    # Then the Workload carries 400, and Kueue admits it and unsuspends the Job
    path = f"{workloads}/{workload['metadata']['name']}"

    def admitted() -> dict[str, Any] | None:
        current = client.get(path)
        conditions = {c["type"]: c["status"] for c in current.get("status", {}).get("conditions") or []}
        return current if conditions.get("Admitted") == "True" else None

    current = objects.eventually(admitted, "Kueue to admit the Workload")
    assert current["spec"]["priority"] == 400
    assert current["status"]["admission"]["clusterQueue"] == queue
    job_path = f"/apis/batch/v1/namespaces/{namespace}/jobs/train"
    objects.eventually(lambda: client.get(job_path)["spec"]["suspend"] is False, "Kueue to unsuspend the Job")


def _conditions(client: KubernetesClient, path: str) -> dict[str, str]:
    current = client.get(path)
    return {c["type"]: c["status"] for c in current.get("status", {}).get("conditions") or []}


def test_kueue_preempts_a_running_workload_for_one_osprey_ranks_higher(
    k8s: LocalKubernetes, namespace: str
) -> None:
    # Given a ClusterQueue with room for one 1-CPU job, and job "low" admitted in it at Osprey priority 10
    queue = f"cq-{namespace}"
    objects.resource_flavor(k8s, f"flavor-{namespace}")
    objects.cluster_queue(k8s, queue, cpu=1, flavor=f"flavor-{namespace}")
    objects.local_queue(k8s, namespace, "team-a", queue)
    client = k8s.client()
    applier = EksApplier(lambda cluster: client)
    workloads = f"/apis/{KUEUE}/namespaces/{namespace}/workloads"

    def workload_of(job: dict[str, Any]) -> str:
        def find() -> str | None:
            for item in client.list(workloads):
                if item["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]:
                    return f"{workloads}/{item['metadata']['name']}"
            return None

        return str(objects.eventually(find, f"Kueue to create the Workload of {job['metadata']['name']}"))

    low = objects.job(k8s, namespace, "low", queue="team-a")
    low_path = workload_of(low)
    assert applier.apply([change(low, 10)]).results[0].outcome is Outcome.APPLIED
    objects.eventually(lambda: _conditions(client, low_path).get("Admitted") == "True", "low admitted")
    # And job "high" waiting behind it for the same CPU
    high = objects.job(k8s, namespace, "high", queue="team-a")
    high_path = workload_of(high)
    time.sleep(1)  # one scheduling pass at equal priority (0 vs 100): "high" must not get in on its own
    assert _conditions(client, high_path).get("Admitted") != "True"
    # When Osprey ranks "high" above "low" (90 -> Workload priority 900)
    assert applier.apply([change(high, 90)]).results[0].outcome is Outcome.APPLIED
    # Then Kueue preempts "low" (evicted, its Job suspended again) and admits "high" in its place
    objects.eventually(lambda: _conditions(client, high_path).get("Admitted") == "True", "high admitted")
    low_conditions = _conditions(client, low_path)
    assert low_conditions.get("Admitted") != "True"
    assert low_conditions.get("Preempted") == "True" or low_conditions.get("Evicted") == "True"
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    objects.eventually(lambda: client.get(f"{jobs}/low")["spec"]["suspend"] is True, "low suspended")
    # (Kueue's Job reconciler unsuspends an admitted Job a moment after the admission)
    objects.eventually(lambda: client.get(f"{jobs}/high")["spec"]["suspend"] is False, "high unsuspended")


def test_a_workload_read_and_patched_through_v1beta1_converts_through_kueue(
    k8s: LocalKubernetes, namespace: str
) -> None:
    # Given a Workload stored as v1beta2 (the version Kueue v0.17 stores)
    client = k8s.client()
    owner = objects.job(k8s, namespace, "train")
    workload = objects.owned_workload(k8s, owner, priority=100)
    name = workload["metadata"]["name"]
    old = f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{namespace}/workloads/{name}"
    # When Osprey's client reads it and patches spec.priority through v1beta1 (older Kueue clusters' version),
    # which the API server converts through the Kueue manager's /convert webhook
    read = client.get(old)
    assert (read["apiVersion"], read["spec"]["priority"]) == ("kueue.x-k8s.io/v1beta1", 100)
    for _ in range(
        5
    ):  # Kueue writes the new Workload's status meanwhile: re-read on 409, as the applier does
        try:
            client.merge_patch(old, {"metadata": {"resourceVersion": read["metadata"]["resourceVersion"]},
                                     "spec": {"priority": 420}})  # fmt: skip
            break
        except ConflictError:
            read = client.get(old)
    # Then the v1beta2 object carries it
    assert client.get(f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{name}")["spec"]["priority"] == 420


def test_a_job_kueue_does_not_manage_gets_the_annotation_which_the_documented_apply_role_cannot_write(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]]
) -> None:
    # Given an opted-in Job without a queue (Kueue leaves it alone: no Workload) in a namespace bound as
    # docs/eks.md says
    bound = objects.namespace(k8s)
    objects.bind(k8s, rbac, bound)
    owner = objects.job(k8s, bound, "train")
    job_path = f"/apis/batch/v1/namespaces/{bound}/jobs/train"
    admin = k8s.client()
    # When the applier runs as osprey-apply, whose documented role has no `patch` on jobs (docs/eks.md adds it
    # only on clusters without Kueue)
    apply_client = k8s.client("osprey-apply")
    [refused] = EksApplier(lambda cluster: apply_client).apply([change(owner, 55)]).results
    # Then the job fails permanently with the authorizer's 403 and this page's hint, and nothing is written
    assert (refused.outcome, refused.transient) == (Outcome.FAILED, False)
    assert 'cannot patch resource "jobs"' in refused.reason
    assert "docs/eks.md" in refused.reason
    assert "osprey.aws/derived-priority" not in (admin.get(job_path)["metadata"].get("annotations") or {})
    # When an identity allowed to patch the Job applies it
    [result] = EksApplier(lambda cluster: admin).apply([change(owner, 55)]).results
    # Then the decision is recorded as the annotation on the Job itself
    assert result.outcome is Outcome.APPLIED, result.reason
    assert result.reason == f"patched annotation Job {bound}/train"
    assert admin.get(job_path)["metadata"]["annotations"]["osprey.aws/derived-priority"] == "55"
