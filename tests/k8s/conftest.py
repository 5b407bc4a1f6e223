"""The real-Kubernetes fixture: one control plane per test session (tests/k8s/cluster.py).

Where the binaries ``.ci/k8s`` builds are missing the tests skip and say why; with ``OSPREY_REQUIRE_K8S=1``
(set by ``.ci/run``) they fail instead, so CI can never pass by skipping them. Teardown asserts that no process
of the control plane is left behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.k8s import objects
from tests.k8s.cluster import METRICS_CERT_DIR, LocalKubernetes, find_binaries

REQUIRE_VARIABLE = "OSPREY_REQUIRE_K8S"


def _unavailable() -> None:
    binaries = find_binaries()
    missing = binaries.missing(kueue_manager=True)
    if missing:
        reason = (
            f"not built: {', '.join(str(path) for path in missing)}; `bash .ci/k8s` builds them (needs Go)"
        )
    elif os.geteuid() != 0 and not (METRICS_CERT_DIR / "tls.key").exists():
        reason = f"the Kueue manager reads a certificate from {METRICS_CERT_DIR}, which only root can create"
    else:
        return
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_VARIABLE}=1 but a real Kubernetes cannot run here: {reason}", pytrace=False)
    pytest.skip(f"real Kubernetes unavailable: {reason}")


@pytest.fixture(scope="session")
def k8s() -> Iterator[LocalKubernetes]:
    """etcd, kube-apiserver (RBAC), Kueue's CRDs and the Kueue manager with its webhooks, on loopback."""
    _unavailable()
    cluster = LocalKubernetes(find_binaries()).start()
    try:
        yield cluster
    finally:
        root = cluster.root
        cluster.stop()
        assert cluster.leftovers() == [], f"processes of the local Kubernetes in {root} outlived its teardown"


@pytest.fixture(scope="session")
def rbac(k8s: LocalKubernetes) -> list[dict[str, Any]]:
    """docs/eks.md's ClusterRoles and ClusterRoleBinding, created once; its RoleBindings are returned as
    templates for :func:`tests.k8s.objects.bind` (each test binds its own namespace)."""
    documents = objects.documented_rbac()
    for document in documents:
        kind = document["kind"]
        if kind in ("ClusterRole", "ClusterRoleBinding"):
            k8s.create(f"{objects.RBAC}/{kind.lower()}s", document)
    return [d for d in documents if d["kind"] == "RoleBinding"]
