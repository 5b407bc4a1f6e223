"""A Kueue cohort on the real Kueue (issue 37, item 4): three ClusterQueues, one lending, one borrowing, one at its
quota, with ``reclaimWithinCohort: Any`` (docs/multi-tenant.md).

Given the borrower running two workloads on the lender's idle quota, when Osprey raises them above everything else
and the lender then submits, then the real Kueue still reclaims the lent quota at once: the lender's workload is
admitted, a borrowing workload is preempted, the queue at its quota is untouched. Which of the borrowing workloads
goes is the one Osprey ranks lower: its writes choose the victim, never whether the team gets its quota back.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from osprey_control.backends import Outcome
from osprey_control.backends.eks import EksApplier, KubernetesClient
from tests.k8s import objects
from tests.k8s.cluster import LocalKubernetes
from tests.k8s.objects import KUEUE, change


def _cluster_queue(k8s: LocalKubernetes, name: str, cohort: str, flavor: str, quota: dict[str, str]) -> None:
    k8s.create(f"/apis/{KUEUE}/clusterqueues", {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": flavor, "resources": [{"name": "cpu", **quota}]}],
            }],
        },
    })  # fmt: skip


def _conditions(client: KubernetesClient, path: str) -> dict[str, str]:
    current = client.get(path)
    return {c["type"]: c["status"] for c in current.get("status", {}).get("conditions") or []}


def _admitted(client: KubernetesClient, path: str) -> bool:
    return _conditions(client, path).get("Admitted") == "True"


def test_kueue_reclaims_a_lent_quota_whatever_osprey_writes(k8s: LocalKubernetes) -> None:
    namespace = objects.namespace(k8s, "cohort")
    flavor, cohort = f"flavor-{namespace}", f"cohort-{namespace}"
    objects.resource_flavor(k8s, flavor)
    quotas = {
        "lender": {"nominalQuota": "2"},
        "borrower": {"nominalQuota": "1", "borrowingLimit": "2"},
        "full": {"nominalQuota": "1"},
    }
    for team, quota in quotas.items():
        _cluster_queue(k8s, f"{team}-{namespace}", cohort, flavor, quota)
        objects.local_queue(k8s, namespace, team, f"{team}-{namespace}")
    client = k8s.client()
    applier = EksApplier(lambda cluster: client)
    workloads = f"/apis/{KUEUE}/namespaces/{namespace}/workloads"

    def submit(name: str, queue: str) -> tuple[dict[str, Any], str]:
        job = objects.job(k8s, namespace, name, queue=queue)
        workload = objects.workload_of(k8s, job)
        return job, f"{workloads}/{workload['metadata']['name']}"

    # Given the queue at its quota running one job, and the borrower three: one in its quota, two on the
    # lender's idle quota
    _, full_path = submit("full-1", "full")
    borrowed = [submit(f"borrow-{index}", "borrower") for index in range(3)]
    for path in [full_path, *(path for _, path in borrowed)]:
        objects.eventually(partial(_admitted, client, path), f"{path} admitted")
    # When Osprey ranks the borrower's jobs above everything (90, 95, 100: Workload priorities 900-1000)
    report = applier.apply(
        [change(job, priority) for (job, _), priority in zip(borrowed, (95, 90, 100), strict=True)]
    )
    assert [result.outcome for result in report.results] == [Outcome.APPLIED] * 3, report.results
    # ... and the lender submits one job at its default priority (0)
    _, lender_path = submit("lend-1", "lender")

    # Then Kueue admits it, reclaiming its quota from the borrower
    objects.eventually(lambda: _admitted(client, lender_path), "the lender's job admitted")
    states = {path: _conditions(client, path) for _, path in borrowed}
    preempted = [path for path, conditions in states.items() if conditions.get("Admitted") != "True"]
    # ... by preempting exactly one borrowing workload, the one Osprey ranked lowest (90)
    assert preempted == [borrowed[1][1]], states
    assert (
        states[borrowed[1][1]].get("Preempted") == "True" or states[borrowed[1][1]].get("Evicted") == "True"
    )
    # ... and the queue at its quota keeps its workload
    assert _admitted(client, full_path)
