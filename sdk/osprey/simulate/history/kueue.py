"""Kueue: ``kubectl get workloads -A -o json`` (a ``List`` of ``kueue.x-k8s.io`` Workloads).

- GPUs: over ``spec.podSets``, ``count`` x the pod's ``nvidia.com/gpu`` (its containers' requests, else
  limits); hosts: the pods of the podSets that ask for GPUs.
- Submit: ``metadata.creationTimestamp``; start: the last time the ``Admitted`` condition turned True (an
  evicted workload that was admitted again ran from then); end: the ``Finished`` condition's time when it is
  True. Admitted and not Finished: running; never admitted: queued (or, when Finished, never started).
- Team: ``spec.queueName`` (the LocalQueue), prefixed by the namespace; priority: ``spec.priority`` (the
  WorkloadPriorityClass's value Kueue resolved at creation), 0 without one.
- Limit: ``spec.maximumExecutionTimeSeconds`` (Kueue 0.10+), none without it.
"""

from __future__ import annotations

from typing import Any

from osprey.simulate.history.record import (
    HistoryError,
    PastJob,
    dig,
    item_error,
    parse_time,
    positive_int,
    require,
)

__all__: list[str] = []

GPU_RESOURCE = "nvidia.com/gpu"


def looks_like_workloads(document: Any) -> bool:
    items = document.get("items") if isinstance(document, dict) else None
    return (
        isinstance(items, list)
        and bool(items)
        and all(isinstance(item, dict) and item.get("kind") == "Workload" for item in items)
    ) or (isinstance(document, dict) and document.get("kind") == "Workload")


def _pod_gpus(template: Any, where: str) -> int:
    containers = dig(template, "spec.containers")
    if not isinstance(containers, list):
        raise ValueError(f"{where}.template.spec.containers: missing field")
    total = 0
    for container in containers:
        resources = dig(container, "resources") or {}
        value = (resources.get("requests") or {}).get(GPU_RESOURCE)
        if value is None:
            value = (resources.get("limits") or {}).get(GPU_RESOURCE)
        if value is not None:
            total += positive_int(value, f"{where}.template resources {GPU_RESOURCE}")
    return total


def _condition_time(conditions: list[Any], kind: str, where: str) -> float | None:
    for condition in conditions:
        if (
            isinstance(condition, dict)
            and condition.get("type") == kind
            and condition.get("status") == "True"
        ):
            return parse_time(require(condition, "lastTransitionTime", f"{where} {kind}"), f"{kind} time")
    return None


def _workload(item: Any, where: str) -> PastJob:
    name = require(item, "metadata.name", where)
    namespace = dig(item, "metadata.namespace") or "default"
    submit = parse_time(require(item, "metadata.creationTimestamp", where), "metadata.creationTimestamp")
    pod_sets = require(item, "spec.podSets", where)
    if not isinstance(pod_sets, list):
        raise ValueError(f"{where}: spec.podSets is not a list")
    gpus = hosts = 0
    for index, pod_set in enumerate(pod_sets):
        place = f"{where}: spec.podSets[{index}]"
        count = positive_int(require(pod_set, "count", place), f"{place}.count")
        per_pod = _pod_gpus(require(pod_set, "template", place), place)
        gpus += count * per_pod
        hosts += count if per_pod else 0
    conditions = dig(item, "status.conditions") or []
    start = _condition_time(conditions, "Admitted", where)
    end = _condition_time(conditions, "Finished", where)
    finished = next(
        (
            c
            for c in conditions
            if isinstance(c, dict) and c.get("type") == "Finished" and c.get("status") == "True"
        ),
        {},
    )
    limit = dig(item, "spec.maximumExecutionTimeSeconds")
    queue = dig(item, "spec.queueName") or "default"
    return PastJob(
        job_id=f"{namespace}/{name}",
        submit=submit,
        start=start,
        end=end,
        gpus=gpus,
        nodes=max(1, hosts),
        limit_s=float(positive_int(limit, "spec.maximumExecutionTimeSeconds")) if limit else None,
        team=f"{namespace}/{queue}",
        priority_class=positive_int(dig(item, "spec.priority") or 0, "spec.priority", minimum=None),
        state=str(finished.get("reason") or ("Admitted" if start is not None else "Pending")),
    )


def read_workloads(document: Any, source: str) -> list[PastJob]:
    """The Workloads of ``kubectl get workloads -A -o json``; :class:`HistoryError` naming the item and field."""
    items = document.get("items") if isinstance(document, dict) and "items" in document else [document]
    if not isinstance(items, list):
        raise HistoryError(f"{source}: items is not a list of Workloads")
    jobs = []
    for index, item in enumerate(items):
        where = f"items[{index}]"
        try:
            jobs.append(_workload(item, where))
        except ValueError as error:
            raise item_error(source, where, error) from None
    return jobs
