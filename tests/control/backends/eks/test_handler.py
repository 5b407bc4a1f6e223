"""The EKS discovery Lambda: typed environment, one sink call per observation, per-cluster isolation."""

from __future__ import annotations

import json
from typing import Any

import pytest

import osprey_handlers.eks_discovery as entry
from osprey_control.backends.eks import KubernetesClient
from osprey_control.backends.eks.discovery_run import run_discovery
from osprey_control.backends.eks.settings import EksDiscoveryEnvironment
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import add_job, add_workload
from tests.lambda_context import lambda_context


def test_environment_is_typed_and_errors_say_what_to_set() -> None:
    env = EksDiscoveryEnvironment.from_environ(
        {"OSPREY_EKS_CLUSTERS": " a, b ,", "OSPREY_EKS_INCLUDE_PODS": "false"}
    )
    assert env.cluster_names == ("a", "b")
    assert env.include_pods is False
    with pytest.raises(ValueError, match="OSPREY_EKS_CLUSTERS"):
        EksDiscoveryEnvironment.from_environ({})


def test_handler_sends_each_observation_to_the_sink_and_isolates_a_broken_cluster(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two clusters: "gpu" (the fake server, one Kueue-managed job) and "broken" (cannot be reached)
    job = add_job(fake_k8s, "train")
    add_workload(fake_k8s, job, priority=300)

    def connector(cluster: str) -> KubernetesClient:
        if cluster == "broken":
            raise RuntimeError("EKS cluster 'broken' has no API endpoint yet")
        return k8s_client

    seen: list[dict[str, Any]] = []
    env = EksDiscoveryEnvironment(cluster_names=("broken", "gpu"))
    # When discovery runs
    result = run_discovery(env, seen.append, connector=connector)
    # Then the sink got the job with its Workload, the result is JSON-able counts (no per-job record: it is
    # the cycle state machine's state), and the broken cluster is reported, not raised
    assert [item["native_id"] for item in seen] == ["gpu/ml/train/uid-train"]
    assert seen[0]["workload"]["priority"] == 300
    assert json.loads(json.dumps(result)) == result
    assert (result["jobs"], result["recorded"], result["unrecorded"]) == (1, 0, 0)
    assert result["clusters"][0] == {
        "cluster": "broken",
        "error": "RuntimeError: EKS cluster 'broken' has no API endpoint yet",
    }
    assert result["clusters"][1] == {
        "cluster": "gpu",
        "jobs": 1,
        "problems": 0,
        "kueue_version": "v1beta1",
        "kinds_missing": result["clusters"][1]["kinds_missing"],
        "reconciled": None,  # no registry: nothing to reconcile
    }

    # And the Lambda entry reads its environment and uses the same path
    monkeypatch.setenv("OSPREY_EKS_CLUSTERS", "gpu")
    monkeypatch.setattr(entry, "_cached_connect", connector)
    answer = entry.handler({}, lambda_context("osprey-eks-discovery", 256))
    assert (answer["jobs"], answer["clusters"][0]["cluster"]) == (1, "gpu")
