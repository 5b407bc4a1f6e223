"""Given docs/eks.md's access section (the RBAC users apply to their clusters), when its YAML is read, then
discovery, apply and the gang watch are separate groups with only their own rights (discovery read-only and
cluster-wide, the two writers bound per namespace, apply patching Kueue Workloads only), and an admission
policy lets those writers change only objects carrying the label Osprey's code checks."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from osprey_control.backends.eks import admission_policy
from osprey_control.contract import ENABLED_KUBERNETES
from tests.conftest import REPO_ROOT

GROUPS = {"eksDiscovery": "osprey-discovery", "apply": "osprey-apply", "gangWatch": "osprey-gang-watch"}
READ = {"get", "list", "watch"}


@pytest.fixture(scope="module")
def section() -> str:
    text = (REPO_ROOT / "docs" / "eks.md").read_text()
    start = text.index("## Access: EKS access entries and RBAC")
    return text[start : text.index("\n## ", start + 1)]


@pytest.fixture(scope="module")
def documents(section: str) -> list[dict[str, Any]]:
    blocks = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    return [document for block in blocks for document in yaml.safe_load_all(block) if document]


def _named(documents: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in documents if d["kind"] == kind}


def _grants(role: dict[str, Any]) -> dict[str, set[str]]:
    """``group/resource`` → verbs."""
    found: dict[str, set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                found.setdefault(f"{group}/{resource}", set()).update(rule["verbs"])
    return found


def _bound_groups(bindings: list[dict[str, Any]], role: str) -> set[str]:
    return {
        subject["name"]
        for binding in bindings
        if binding["roleRef"]["name"] == role
        for subject in binding["subjects"]
        if subject["kind"] == "Group"
    }


def test_each_lambda_role_gets_its_own_group_through_an_access_entry(section: str) -> None:
    # Then one access entry per role, each naming its own group, and nothing shared by all three
    for group in GROUPS.values():
        assert f"--kubernetes-groups {group}\n" in section
    assert "osprey-control" not in section


def test_discovery_only_reads_and_is_the_only_cluster_wide_binding(documents: list[dict[str, Any]]) -> None:
    roles = _named(documents, "ClusterRole")
    assert set(roles) == set(GROUPS.values())
    # Then discovery's role has no verb that writes, on anything
    assert all(verbs <= READ for verbs in _grants(roles["osprey-discovery"]).values())
    # ... and only it is bound cluster-wide
    cluster_bindings = [d for d in documents if d["kind"] == "ClusterRoleBinding"]
    assert {binding["roleRef"]["name"] for binding in cluster_bindings} == {"osprey-discovery"}
    assert _bound_groups(cluster_bindings, "osprey-discovery") == {"osprey-discovery"}


def test_apply_and_the_gang_watch_are_bound_per_namespace_with_only_the_writes_they_make(
    documents: list[dict[str, Any]],
) -> None:
    roles = _named(documents, "ClusterRole")
    bindings = [d for d in documents if d["kind"] == "RoleBinding"]
    # Then both writers are bound by namespaced RoleBindings, each to its own group
    for role in ("osprey-apply", "osprey-gang-watch"):
        assert _bound_groups(bindings, role) == {role}
        assert all(b["metadata"].get("namespace") for b in bindings if b["roleRef"]["name"] == role)
    # ... apply patches Kueue Workloads only (the job kinds it only reads)
    apply = _grants(roles["osprey-apply"])
    assert {key for key, verbs in apply.items() if verbs - READ} == {"kueue.x-k8s.io/workloads"}
    assert apply["kueue.x-k8s.io/workloads"] - READ == {"patch"}
    # ... and the gang watch may suspend (patch) but never create or delete
    watch = _grants(roles["osprey-gang-watch"])
    assert set().union(*watch.values()) - READ == {"patch"}
    assert "kueue.x-k8s.io/workloads" in watch
    assert all(
        "*" not in key and "*" not in verbs for role in roles.values() for key, verbs in _grants(role).items()
    )


def test_an_admission_policy_lets_the_writers_change_only_opted_in_objects(section: str) -> None:
    # The section applies the manifest Osprey ships (`osprey eks admission`); its field-level rules are
    # tested in tests/control/backends/eks/test_admission_policy.py
    assert "osprey eks admission | kubectl apply -f -" in section
    documents = [document for document in yaml.safe_load_all(admission_policy()) if document]
    (policy,) = _named(documents, "ValidatingAdmissionPolicy").values()
    (binding,) = _named(documents, "ValidatingAdmissionPolicyBinding").values()
    # Then it applies to Osprey's two writing groups, on every kind they patch ...
    (condition,) = policy["spec"]["matchConditions"]
    assert "'osprey-apply'" in condition["expression"]
    assert "'osprey-gang-watch'" in condition["expression"]
    resources = {
        (group, resource)
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert resources == {
        ("kueue.x-k8s.io", "workloads"),
        ("batch", "jobs"),
        ("kubeflow.org", "pytorchjobs"),
        ("jobset.x-k8s.io", "jobsets"),
    }
    # ... requires the opt-in label the code checks, as it was before the change, and denies otherwise
    first = policy["spec"]["validations"][0]["expression"]
    assert f"oldObject.metadata.labels['{ENABLED_KUBERNETES}']" in first
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
