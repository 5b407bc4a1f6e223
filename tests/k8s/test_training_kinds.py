"""PyTorchJob (``kubeflow.org/v1``) and JobSet (``jobset.x-k8s.io/v1alpha2``) on the real API server, managed by
the real Kueue through its integrations (tests/k8s/kueue.py ``FRAMEWORKS``): discovery, the applier and gang
readiness, each as its own identity of docs/eks.md's RBAC.

No training operator or JobSet controller runs (their CRDs only): the Workload is Kueue's, made from the job's
spec; the pods are the test's, labelled as the operator labels them, and their Ready status is written by the
test as a kubelet would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from osprey_control.backends import Outcome
from osprey_control.backends.eks import EksApplier, KubernetesGang, discover
from osprey_control.backends.eks.resources import kind_for
from tests.k8s import objects
from tests.k8s.cluster import LocalKubernetes
from tests.k8s.objects import KUEUE, change

_Build = Callable[..., dict[str, Any]]
KINDS: dict[str, tuple[_Build, Callable[[dict[str, Any]], Any]]] = {
    # kind: (builder, where the job says it is suspended, which Kueue flips on admission and eviction)
    "PyTorchJob": (objects.pytorchjob, lambda obj: obj["spec"]["runPolicy"].get("suspend")),
    "JobSet": (objects.jobset, lambda obj: obj["spec"].get("suspend")),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_discovery_the_applier_and_gang_readiness_on_a_kueue_managed_training_job(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]], kind: str
) -> None:
    # Given a namespace bound as docs/eks.md says, with two CPUs of Kueue quota, and an opted-in 2-pod job of
    # ``kind`` queued to it
    namespace = objects.namespace(k8s, kind.lower())
    objects.bind(k8s, rbac, namespace)
    queue = objects.queues(k8s, namespace, cpu=2)
    build, suspended = KINDS[kind]
    owner = build(k8s, namespace, "train", queue=queue)
    admin = k8s.client()
    job_path = kind_for(kind).item(namespace, "train")
    # When the real Kueue makes its Workload
    workload = objects.workload_of(k8s, owner)
    workload_path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{workload['metadata']['name']}"
    # Then the Workload carries the opt-in label (labelKeysToCopy) and one pod set per replica type, 2 pods
    assert workload["metadata"]["labels"]["osprey.aws/enabled"] == "true"
    assert sum(pod_set["count"] for pod_set in workload["spec"]["podSets"]) == 2
    # When the applier writes the job's priority as osprey-apply
    apply_client = k8s.client("osprey-apply")
    [result] = EksApplier(lambda cluster: apply_client).apply([change(owner, 55)]).results
    # Then it lands on that Workload
    assert result.outcome is Outcome.APPLIED, result.reason
    assert result.reason.startswith("patched workload")
    assert admin.get(workload_path)["spec"]["priority"] == 550
    # And Kueue admits the job (it unsuspends it)
    objects.eventually(lambda: suspended(admin.get(job_path)) is False, f"Kueue to admit the {kind}")
    # When its two pods exist, one of them Ready
    first, second = objects.pod(k8s, owner, 0), objects.pod(k8s, owner, 1)
    objects.ready(k8s, namespace, first)
    # Then discovery, as osprey-discovery, reports the job with its kind, its admitted Workload, the priority
    # Osprey wrote and its two pods
    found = discover(k8s.client("osprey-discovery"), "local", namespaces=[namespace])
    assert (found.problems, found.kinds_missing) == ([], [])
    [observed] = found.observations
    assert (observed.kind, observed.name) == (kind, "train")
    assert observed.native_id == f"local/{namespace}/train/{owner['metadata']['uid']}"
    assert observed.workload is not None
    assert (observed.workload.name, observed.workload.admitted, observed.workload.priority) == (
        workload["metadata"]["name"], True, 550)  # fmt: skip
    assert sorted(node.node_id for node in observed.nodes) == [first, second]
    # And the gang watch, as osprey-gang-watch, counts 1 of the 2 workers Ready, then 2 of 2
    gang = KubernetesGang(k8s.client("osprey-gang-watch"), kind, namespace, "train", kueue="v1beta2")
    readiness = gang.readiness()
    assert (readiness.ready_workers, readiness.requested_workers, readiness.finished) == (1, 2, False)
    objects.ready(k8s, namespace, second)
    assert (gang.readiness().ready_workers, gang.readiness().requested_workers) == (2, 2)
    # When the watch requeues it, Kueue evicts the Workload and suspends the job; resumed, it is admitted again
    gang.suspend()
    assert admin.get(workload_path)["spec"]["active"] is False
    objects.eventually(lambda: suspended(admin.get(job_path)) is True, f"Kueue to suspend the {kind}")
    gang.resume()
    objects.eventually(lambda: suspended(admin.get(job_path)) is False, f"Kueue to re-admit the {kind}")
