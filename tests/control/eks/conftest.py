"""Fixtures: a fake API server per test and a client for it that never sleeps between retries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from osprey_control.eks.client import KubernetesClient
from tests.control.eks.fake_k8s import FakeKubernetes, run_fake


@pytest.fixture
def fake_k8s() -> Iterator[FakeKubernetes]:
    yield from run_fake(FakeKubernetes())


@pytest.fixture
def k8s_client(fake_k8s: FakeKubernetes) -> KubernetesClient:
    return KubernetesClient(fake_k8s.url, timeout=5, max_attempts=3, backoff=0, sleep=lambda _: None)
