"""docs/eks.md's RBAC on a real API server: each Osprey identity can do what its code needs and nothing more.

The ClusterRoles and bindings are read from docs/eks.md itself (the YAML block after **Roles.**), so the page
a cluster admin copies from is the one tested. Each identity is a static token of the fixture in the group an
EKS access entry would give the Lambda's role (tests/k8s/cluster.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from osprey_control.backends import Outcome
from osprey_control.backends.eks import (
    EksApplier,
    KubernetesApiError,
    KubernetesClient,
    UnauthorizedError,
)
from osprey_control.backends.eks import admission_policy as eks_admission_policy
from tests.k8s import objects
from tests.k8s.cluster import LocalKubernetes
from tests.k8s.objects import KUEUE, change

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def test_the_documented_rbac_lets_the_apply_role_write_a_workload_priority_and_nothing_more(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]]
) -> None:
    # Given a namespace bound as docs/eks.md says, with an opted-in Job and the Workload it controls
    bound = objects.namespace(k8s)
    objects.bind(k8s, rbac, bound)
    owner = objects.job(k8s, bound, "train")
    workload = objects.owned_workload(k8s, owner, priority=100)
    workload_path = f"/apis/{KUEUE}/namespaces/{bound}/workloads/{workload['metadata']['name']}"
    apply_client = k8s.client("osprey-apply")
    # When the applier runs as the osprey-apply identity
    report = EksApplier(lambda cluster: apply_client).apply([change(owner, 55)])
    # Then the priority lands
    [result] = report.results
    assert result.outcome is Outcome.APPLIED, result.reason
    assert k8s.client().get(workload_path)["spec"]["priority"] == 550
    # And that identity can do nothing else: not patch the Job, delete or create Workloads, read Secrets
    job_path = f"/apis/batch/v1/namespaces/{bound}/jobs/train"
    refused: list[Callable[[], object]] = [
        lambda: apply_client.merge_patch(job_path, {"spec": {"suspend": False}}),
        lambda: apply_client.request("DELETE", workload_path),
        lambda: apply_client.request("POST", f"/apis/{KUEUE}/namespaces/{bound}/workloads", body=workload),
        lambda: apply_client.get(f"/api/v1/namespaces/{bound}/secrets"),
        lambda: apply_client.get(f"/apis/{KUEUE}/workloads"),  # every namespace's
    ]
    for attempt in refused:
        with pytest.raises(UnauthorizedError) as caught:
            attempt()
        assert caught.value.status == 403
    assert k8s.client().get(workload_path)["spec"]["priority"] == 550


def test_a_namespace_without_the_bindings_fails_the_apply_permanently(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]]
) -> None:
    # Given an opted-in Job and its Workload in a namespace that has no osprey-apply RoleBinding
    unbound = objects.namespace(k8s)
    owner = objects.job(k8s, unbound, "train")
    workload = objects.owned_workload(k8s, owner, priority=100)
    apply_client = k8s.client("osprey-apply")
    # When the applier runs as osprey-apply
    report = EksApplier(lambda cluster: apply_client).apply([change(owner, 55)])
    # Then the job fails with the server's 403, as a permanent failure, and the Workload is untouched
    [result] = report.results
    assert (result.outcome, result.transient) == (Outcome.FAILED, False)
    assert "403" in result.reason
    assert "docs/eks.md" in result.reason
    path = f"/apis/{KUEUE}/namespaces/{unbound}/workloads/{workload['metadata']['name']}"
    assert k8s.client().get(path)["spec"]["priority"] == 100


def test_service_account_tokens_are_signed_and_accepted(k8s: LocalKubernetes) -> None:
    # Given a ServiceAccount and a token the API server issues for it (TokenRequest, signed with the fixture's key)
    namespace = objects.namespace(k8s)
    k8s.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "osprey"}})
    issued = k8s.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/osprey/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )
    token = issued["status"]["token"]
    # When a client presents that token
    client = KubernetesClient(k8s.server, token=lambda: token, ca_pem=k8s.ca.pem)
    review = client.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    # Then the API server knows it as that ServiceAccount
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:osprey"


ADMISSION = "/apis/admissionregistration.k8s.io/v1"


@pytest.fixture
def admission_policy(k8s: LocalKubernetes) -> Iterator[dict[str, Any]]:
    """Osprey's shipped ValidatingAdmissionPolicy and binding (``osprey eks admission``), installed for one test
    and removed after: it is cluster-wide."""
    policy, binding = [d for d in yaml.safe_load_all(eks_admission_policy()) if d]
    created = k8s.create(f"{ADMISSION}/validatingadmissionpolicies", policy)
    k8s.create(f"{ADMISSION}/validatingadmissionpolicybindings", binding)
    yield created
    client = k8s.client()
    client.request("DELETE", f"{ADMISSION}/validatingadmissionpolicybindings/{binding['metadata']['name']}")
    client.request("DELETE", f"{ADMISSION}/validatingadmissionpolicies/{policy['metadata']['name']}")


def test_the_admission_policy_lets_each_identity_change_only_its_own_field(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]], admission_policy: dict[str, Any]
) -> None:
    # Given the documented RBAC and Osprey's admission policy, an opted-in Job with its Workload, and a
    # Workload of a Job that did not opt in
    namespace = objects.namespace(k8s)
    objects.bind(k8s, rbac, namespace)
    owner = objects.job(k8s, namespace, "train")
    workload = objects.owned_workload(k8s, owner, priority=100)
    path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{workload['metadata']['name']}"
    other = objects.job(k8s, namespace, "other", labels={"osprey.aws/enabled": "false"})
    other_workload = objects.owned_workload(k8s, other, priority=100, opted_in=False)
    other_path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{other_workload['metadata']['name']}"
    apply_client, gang_client = k8s.client("osprey-apply"), k8s.client("osprey-gang-watch")

    def refused(attempt: Callable[[], object]) -> str:
        with pytest.raises(KubernetesApiError) as caught:
            attempt()
        assert caught.value.status in (403, 422), caught.value
        # (the policy refuses an authorized request: never reported as a missing RBAC binding)
        assert not isinstance(caught.value, UnauthorizedError), caught.value
        assert "access entry" not in str(caught.value)
        return caught.value.message

    # (The API server compiled its CEL when it accepted the policy; status.typeChecking is written by
    # kube-controller-manager, which this fixture does not run. The policy is enforced once the server's
    # informer has it: a probe Workload is written, each time a new value, until the first refusal.)
    probe = objects.owned_workload(k8s, objects.job(k8s, namespace, "probe"), priority=0)
    probe_path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{probe['metadata']['name']}"
    _retry_until_refused(gang_client, probe_path)
    # When osprey-gang-watch changes spec.priority, or osprey-apply spec.active or a label
    assert "spec.active" in refused(lambda: gang_client.merge_patch(path, {"spec": {"priority": 7}}))
    assert "spec.priority" in refused(lambda: apply_client.merge_patch(path, {"spec": {"active": False}}))
    assert "labels" in refused(
        lambda: apply_client.merge_patch(path, {"metadata": {"labels": {"osprey.aws/enabled": "false"}}})
    )
    # And osprey-apply writes the priority of the Workload of a Job that did not opt in
    assert "osprey.aws/enabled=true" in refused(
        lambda: apply_client.merge_patch(other_path, {"spec": {"priority": 7}})
    )
    # Then none of those landed, and the applier's own write (spec.priority, opted in) does
    report = EksApplier(lambda cluster: apply_client).apply([change(owner, 55)])
    assert report.results[0].outcome is Outcome.APPLIED, report.results[0].reason
    admin = k8s.client()
    assert (admin.get(path)["spec"]["priority"], admin.get(path)["spec"]["active"]) == (550, True)
    assert admin.get(other_path)["spec"]["priority"] == 100


def _retry_until_refused(client: KubernetesClient, path: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    value = 1
    while time.monotonic() < deadline:
        try:
            client.merge_patch(path, {"spec": {"priority": value}})
        except KubernetesApiError as error:
            if error.status not in (403, 422):
                raise
            return
        value += 1
        time.sleep(0.2)
    raise AssertionError("the admission policy never took effect")
