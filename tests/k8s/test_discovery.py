"""EKS discovery against the real API server and the real Kueue, as the osprey-discovery identity of
docs/eks.md's RBAC."""

from __future__ import annotations

from typing import Any

from osprey_control.backends.eks import EksApplier, discover
from osprey_control.registry import JobStatus
from tests.k8s import objects
from tests.k8s.cluster import LocalKubernetes
from tests.k8s.objects import KUEUE, change


def test_discovery_sees_each_job_with_its_workload_status_and_node(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]]
) -> None:
    # Given a namespace with Kueue's queues (one CPU), job "first" admitted and running one ready pod on a node
    # backed by an EC2 instance, and job "second" waiting for the CPU
    namespace = objects.namespace(k8s, "ml")
    objects.bind(k8s, rbac, namespace)
    queue = f"cq-{namespace}"
    objects.resource_flavor(k8s, f"flavor-{namespace}")
    objects.cluster_queue(k8s, queue, cpu=1, flavor=f"flavor-{namespace}")
    objects.local_queue(k8s, namespace, "team-a", queue)
    admin = k8s.client()
    first = objects.job(k8s, namespace, "first", queue="team-a")
    applier = EksApplier(lambda cluster: admin)
    workloads = f"/apis/{KUEUE}/namespaces/{namespace}/workloads"
    objects.eventually(lambda: list(admin.list(workloads)), "Kueue to create first's Workload")
    # (Osprey ranks "first" above "second": else the real Kueue preempts it for "second", as it should)
    assert applier.apply([change(first, 80)]).results[0].reason.startswith("patched")
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    objects.eventually(lambda: admin.get(f"{jobs}/first")["spec"]["suspend"] is False, "Kueue to admit first")
    second = objects.job(k8s, namespace, "second", queue="team-a")
    node = f"node-{namespace}"
    k8s.create("/api/v1/nodes", {
        "metadata": {"name": node, "labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
        "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"},
    })  # fmt: skip
    k8s.create(f"/api/v1/namespaces/{namespace}/pods", {
        "metadata": {"name": "first-0", "labels": {**objects.OPT_IN, "batch.kubernetes.io/job-name": "first"}},
        "spec": {"nodeName": node, "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "train:latest"}]},
    })  # fmt: skip
    # (no Job controller runs here: the test writes what it would, one active and ready pod)
    admin.request("PATCH", f"{jobs}/first/status", body={"status": {
        "active": 1, "ready": 1, "startTime": first["metadata"]["creationTimestamp"]}},
        content_type="application/merge-patch+json")  # fmt: skip
    objects.eventually(lambda: any(w["metadata"]["ownerReferences"][0]["name"] == "second"
                            for w in admin.list(workloads)),
                "Kueue to create second's Workload")  # fmt: skip
    # And Osprey has written a priority for "second"
    assert applier.apply([change(second, 30)]).results[0].reason.startswith("patched")
    # When discovery runs as osprey-discovery
    result = discover(k8s.client("osprey-discovery"), "local", namespaces=[namespace])
    # Then it reports both jobs, keyed by cluster, namespace, name and uid, with Kueue v1beta2 (every job kind
    # is served: the fixture installs PyTorchJob's and JobSet's CRDs)
    assert (result.kueue_version, result.problems, result.kinds_missing) == ("v1beta2", [], [])
    found = {obs.name: obs for obs in result.observations}
    assert sorted(found) == ["first", "second"]
    assert found["first"].native_id == f"local/{namespace}/first/{first['metadata']['uid']}"
    # And "first" is running on its node's EC2 instance, with its admitted Workload
    assert found["first"].status is JobStatus.RUNNING
    assert found["first"].workload is not None
    assert found["first"].workload.admitted
    [placed] = found["first"].nodes
    assert (placed.node_id, placed.instance_id, placed.instance_type) == (
        "first-0", "i-0123456789abcdef0", "p5.48xlarge")  # fmt: skip
    # And "second" is pending, its Workload not admitted and carrying the priority Osprey wrote
    assert found["second"].status is JobStatus.PENDING
    assert found["second"].workload is not None
    assert (found["second"].workload.admitted, found["second"].workload.priority) == (False, 300)


def test_lists_follow_the_servers_continue_pages_and_a_jobsets_child_job_is_not_a_job_of_its_own(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]]
) -> None:
    # Given three opted-in Jobs, and an opted-in JobSet with a child Job it controls (as the JobSet controller
    # makes them, its labels copied)
    namespace = objects.namespace(k8s, "paged")
    for index in range(3):
        objects.job(k8s, namespace, f"train-{index}")
    parent = objects.jobset(k8s, namespace, "set", queue=objects.queues(k8s, namespace, cpu=2))
    meta = parent["metadata"]
    k8s.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", {
        "metadata": {"name": "set-workers-0", "labels": {**objects.OPT_IN, **objects.POLICY},
                     "ownerReferences": [{"apiVersion": parent["apiVersion"], "kind": "JobSet",
                                          "name": meta["name"], "uid": meta["uid"], "controller": True}]},
        "spec": {"suspend": True, "template": objects.pod_template("1")},
    })  # fmt: skip
    client = k8s.client("osprey-discovery")
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    # When the server is asked for one item per page, it pages with its own continue token
    page = client.get(jobs, {"limit": "1", "labelSelector": "osprey.aws/enabled=true"})
    assert len(page["items"]) == 1
    assert page["metadata"]["continue"]
    # Then Osprey's client follows the pages to every Job
    listed = [job["metadata"]["name"] for job in client.list(jobs, label_selector="osprey.aws/enabled=true",
                                                             page_size=1)]  # fmt: skip
    assert listed == ["set-workers-0", "train-0", "train-1", "train-2"]
    # And discovery reports the JobSet and the three Jobs, never the JobSet's child as a job of its own
    found = discover(client, "local", namespaces=[namespace])
    assert sorted((obs.kind, obs.name) for obs in found.observations) == [
        ("Job", "train-0"), ("Job", "train-1"), ("Job", "train-2"), ("JobSet", "set")]  # fmt: skip
