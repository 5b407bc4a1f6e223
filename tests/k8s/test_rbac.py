"""docs/eks.md's RBAC on a real API server: each Osprey identity can do what its code needs and nothing more.

The ClusterRoles and bindings are read from docs/eks.md itself (the YAML block after **Roles.**), so the page
a cluster admin copies from is the one tested. Each identity is a static token of the fixture in the group an
EKS access entry would give the Lambda's role (tests/k8s/cluster.py)."""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from osprey_control.backends import Outcome
from osprey_control.backends.eks import EksApplier, KubernetesClient, UnauthorizedError
from tests.k8s import objects
from tests.k8s.cluster import LocalKubernetes
from tests.k8s.objects import KUEUE, change

DOC = Path(__file__).resolve().parents[2] / "docs" / "eks.md"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _documented_rbac() -> list[dict[str, Any]]:
    text = DOC.read_text()
    section = text[text.index("**Roles.**") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    return [d for d in yaml.safe_load_all(section[start : section.index("```", start)]) if d]


@pytest.fixture(scope="module")
def rbac(k8s: LocalKubernetes) -> list[dict[str, Any]]:
    """The documented ClusterRoles and ClusterRoleBinding, created once; the RoleBindings are returned as
    templates (their namespace is the test's)."""
    documents = _documented_rbac()
    for document in documents:
        kind = document["kind"]
        if kind in ("ClusterRole", "ClusterRoleBinding"):
            k8s.create(f"{RBAC}/{kind.lower()}s", document)
    return [d for d in documents if d["kind"] == "RoleBinding"]


def _bind(k8s: LocalKubernetes, rolebindings: list[dict[str, Any]], namespace: str) -> None:
    for template in rolebindings:
        binding = copy.deepcopy(template)
        binding["metadata"]["namespace"] = namespace
        k8s.create(f"{RBAC}/namespaces/{namespace}/rolebindings", binding)


def _namespace(k8s: LocalKubernetes) -> str:
    name = f"team-{secrets.token_hex(3)}"
    k8s.apply_namespace(name)
    return name


def test_the_documented_rbac_lets_the_apply_role_write_a_workload_priority_and_nothing_more(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]]
) -> None:
    # Given a namespace bound as docs/eks.md says, with an opted-in Job and the Workload it controls
    bound = _namespace(k8s)
    _bind(k8s, rbac, bound)
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
    unbound = _namespace(k8s)
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
    namespace = _namespace(k8s)
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
