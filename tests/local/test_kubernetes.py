"""The local Kubernetes API plays the kubelet for one thing: a pod turns Ready at a set time, counted by its Job."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from osprey.local.kubernetes import LocalKubernetes


@pytest.fixture
def kubernetes() -> Iterator[LocalKubernetes]:
    server = LocalKubernetes().start()
    yield server
    server.stop()


def _get(server: LocalKubernetes, path: str) -> Any:
    with urllib.request.urlopen(f"{server.url}{path}", timeout=5) as response:
        return json.loads(response.read())


def test_a_pod_turns_ready_at_its_time_and_its_job_counts_it(kubernetes: LocalKubernetes) -> None:
    # Given a Job with two Pending pods, one due to turn Ready now and one in an hour
    kubernetes.add(
        "batch/v1", "jobs", {"metadata": {"name": "ddp", "namespace": "ml"}, "status": {"ready": 0}}
    )
    for pod in ("ddp-0", "ddp-1"):
        kubernetes.add(
            "v1",
            "pods",
            {
                "metadata": {
                    "name": pod,
                    "namespace": "ml",
                    "labels": {"batch.kubernetes.io/job-name": "ddp"},
                },
                "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]},
            },
        )
    kubernetes.ready_at("ml", "ddp-0", time.monotonic())
    kubernetes.ready_at("ml", "ddp-1", time.monotonic() + 3600)

    # When a client lists the Job's pods
    pods = _get(kubernetes, "/api/v1/namespaces/ml/pods?labelSelector=batch.kubernetes.io/job-name=ddp")[
        "items"
    ]

    # Then the due pod is Ready, the other still Pending, and the Job's status.ready says 1
    ready = {pod["metadata"]["name"]: pod["status"]["conditions"][0]["status"] for pod in pods}
    assert ready == {"ddp-0": "True", "ddp-1": "False"}
    assert _get(kubernetes, "/apis/batch/v1/namespaces/ml/jobs/ddp")["status"]["ready"] == 1
