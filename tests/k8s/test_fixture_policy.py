"""Given a machine where the real control plane has not been built, the tests/k8s tests skip with the reason
elsewhere and fail in CI (``OSPREY_REQUIRE_K8S=1``, set by .ci/run), so CI can never pass by skipping them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.k8s import conftest
from tests.k8s.cluster import find_binaries


def test_without_the_binaries_the_tests_skip_with_the_reason_or_fail_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given an empty build cache
    monkeypatch.setenv("OSPREY_K8S_CACHE", str(tmp_path))
    monkeypatch.delenv(conftest.REQUIRE_VARIABLE, raising=False)
    # Then the tests skip, naming what is missing and how to build it
    with pytest.raises(pytest.skip.Exception, match=r"kube-apiserver-v[0-9.]+/kube-apiserver.*bash \.ci/k8s"):
        conftest._unavailable()
    # And under OSPREY_REQUIRE_K8S=1 they fail instead
    monkeypatch.setenv(conftest.REQUIRE_VARIABLE, "1")
    with pytest.raises(
        pytest.fail.Exception, match="OSPREY_REQUIRE_K8S=1 but a real Kubernetes cannot run here"
    ):
        conftest._unavailable()


def test_the_cache_directory_is_keyed_by_the_pinned_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the versions .ci/k8s-versions pins
    monkeypatch.setenv("OSPREY_K8S_CACHE", "/cache")
    binaries = find_binaries()
    # Then each program is looked for where .ci/k8s builds it
    assert binaries.etcd == Path("/cache") / f"etcd-{binaries.versions['ETCD_VERSION']}" / "etcd"
    assert binaries.apiserver.parent.name == f"kube-apiserver-{binaries.versions['KUBERNETES_VERSION']}"
    assert binaries.kueue == Path("/cache") / f"kueue-{binaries.versions['KUEUE_VERSION']}" / "kueue"
    v = binaries.versions
    assert binaries.job_crds_dir == Path("/cache") / (
        f"crds-training-operator-{v['TRAINING_OPERATOR_VERSION']}-jobset-{v['JOBSET_VERSION']}"
    )
