"""The queues and jobs of ``bench/kueue_bench.py`` on a real API server.

- :func:`make_queue`: a ResourceFlavor, a ClusterQueue with a nominal quota of ``nvidia.com/gpu`` (BestEffortFIFO,
  ``withinClusterQueue: LowerPriority``: the setup docs/eks.md asks for) and a LocalQueue, in a namespace of
  the run's own, so the two runs of one bench never share a queue.
- :func:`submit`: a suspended ``batch/v1`` Job opted in to Osprey, one pod per 8-GPU node, each pod asking
  ``nvidia.com/gpu: 8``. Kueue's own Job integration makes its Workload (priority 0: no priority class), admits
  it on quota and unsuspends the Job; nothing runs it (no kubelet, no Job controller).
- :func:`make_cohort`: with ``--tenants``, one ClusterQueue per team in a cohort of the run's own (quota,
  borrowing and lending limits, preemption as the tenants file sets them, docs/multi-tenant.md) and a LocalQueue
  per team named after it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from osprey.simulate.tenants import Tenants
from osprey_control.backends.eks import KubernetesClient

__all__ = ["GPU", "KUEUE", "NODE_GPUS", "make_cohort", "make_queue", "submit"]

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
NODE_GPUS = 8


def _conditions(obj: Mapping[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def make_queue(client: KubernetesClient, namespace: str, quota_gpus: int) -> str:
    """The run's flavor, ClusterQueue and LocalQueue (named after ``namespace``); returns the LocalQueue."""
    name = f"cq-{namespace}"
    client.request(
        "POST",
        f"/apis/{KUEUE}/resourceflavors",
        body={"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"gpu-{namespace}"}},
    )
    client.request("POST", f"/apis/{KUEUE}/clusterqueues",
                   body=_cluster_queue(name, f"gpu-{namespace}", {"nominalQuota": str(quota_gpus)}))  # fmt: skip
    client.request("POST", f"/apis/{KUEUE}/namespaces/{namespace}/localqueues", body={
        "apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "bench"},
        "spec": {"clusterQueue": name},
    })  # fmt: skip
    _wait_active(
        client,
        [f"/apis/{KUEUE}/clusterqueues/{name}", f"/apis/{KUEUE}/namespaces/{namespace}/localqueues/bench"],
    )
    return "bench"


def _cluster_queue(name: str, flavor: str, quota: Mapping[str, str], *, cohort: str | None = None,
                   preemption: Mapping[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": dict(preemption or {"withinClusterQueue": "LowerPriority"}),
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": flavor, "resources": [{"name": GPU, **quota}]}]}],
    }  # fmt: skip
    if cohort is not None:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _wait_active(client: KubernetesClient, paths: list[str]) -> None:
    # A Workload created before Kueue has the queues Active is parked as inadmissible until some other
    # Workload of the queue finishes (the first jobs of a run then wait for nothing): wait for them all.
    deadline = time.monotonic() + 30
    while not all(_conditions(client.get(path)).get("Active") == "True" for path in paths):
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kueue did not report {', '.join(paths)} Active within 30 s")
        time.sleep(0.1)


def make_cohort(client: KubernetesClient, namespace: str, tenants: Tenants) -> dict[str, str]:
    """One ClusterQueue per team of ``tenants`` in a cohort of the run's own, with the team's nominal quota,
    borrowing and lending limits and preemption settings (docs/multi-tenant.md), and a LocalQueue per team named
    after it; returns each team's LocalQueue."""
    flavor, cohort = f"gpu-{namespace}", f"cohort-{namespace}"
    client.request("POST", f"/apis/{KUEUE}/resourceflavors",
                   body={"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": flavor}})  # fmt: skip
    paths = []
    for team in tenants.teams:
        quota = {"nominalQuota": str(team.nominal_gpus)}
        if team.borrowing_limit_gpus is not None:
            quota["borrowingLimit"] = str(team.borrowing_limit_gpus)
        if team.lending_limit_gpus is not None:
            quota["lendingLimit"] = str(team.lending_limit_gpus)
        preemption: dict[str, Any] = {"withinClusterQueue": team.within_cluster_queue,
                                      "reclaimWithinCohort": team.reclaim_within_cohort}  # fmt: skip
        if team.borrow_within_cohort != "Never":
            preemption["borrowWithinCohort"] = {"policy": team.borrow_within_cohort}
        name = f"{team.name}-{namespace}"
        client.request("POST", f"/apis/{KUEUE}/clusterqueues",
                       body=_cluster_queue(name, flavor, quota, cohort=cohort, preemption=preemption))  # fmt: skip
        client.request("POST", f"/apis/{KUEUE}/namespaces/{namespace}/localqueues", body={
            "apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": team.name},
            "spec": {"clusterQueue": name},
        })  # fmt: skip
        paths += [
            f"/apis/{KUEUE}/clusterqueues/{name}",
            f"/apis/{KUEUE}/namespaces/{namespace}/localqueues/{team.name}",
        ]
    _wait_active(client, paths)
    return {team.name: team.name for team in tenants.teams}


def submit(client: KubernetesClient, namespace: str, queue: str, name: str, nodes: int) -> dict[str, Any]:
    """A suspended Job in ``queue``: ``nodes`` pods of 8 GPUs each, opted in to Osprey."""
    gpus = {GPU: str(NODE_GPUS)}
    return client.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body={
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"osprey.aws/enabled": "true", "kueue.x-k8s.io/queue-name": queue}},
        "spec": {"suspend": True, "parallelism": nodes, "completions": nodes, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "train", "image": "train:latest",
                            "resources": {"requests": gpus, "limits": gpus}}]}}},
    })  # fmt: skip
