"""What a job declares about itself at submission: its runtime limit and the GPUs it asks for (docs/design.md §3).

Pure Python, no AWS calls. The collector turns these into the job-level metrics ``requested_gpus`` and, before
the runtime reports progress, the ``remaining_time`` budget (``osprey_control.derivation.job_signals``).

===================  ===========================================  ============================================
source               declared runtime limit (seconds)             requested GPUs
===================  ===========================================  ============================================
SageMaker            ``StoppingCondition.MaxRuntimeInSeconds``    ``ResourceConfig``: ``InstanceCount`` x GPUs
(event, or a                                                      per instance type (``InstanceGroups``
service job's                                                     summed); unknown when any type is unknown
payload)
Batch container      ``timeout.attemptDurationSeconds``           ``resourceRequirements`` of type ``GPU``,
                                                                  summed over the containers (``container``,
                                                                  ECS ``taskProperties``, EKS
                                                                  ``nvidia.com/gpu`` limits, else requests)
Batch multi-node     ``timeout.attemptDurationSeconds``           per node range: its containers' GPUs x its
                                                                  nodes (``targetNodes`` ``a:b``, open end =
                                                                  ``numNodes`` - 1)
Batch service job    the smaller of ``timeoutConfig.              the payload's ``ResourceConfig``
                     attemptDurationSeconds`` and the payload's
                     ``StoppingCondition``
===================  ===========================================  ============================================

Anything missing, malformed, non-positive or beyond ``MAX_DECLARED`` is None (unknown), never 0: a 0 would
read as "no GPUs" or "no time left" to the policy, and no real job declares a billion seconds or GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from osprey_control.catalog import gpus_for_instance_type

__all__ = ["smallest"]

KUBERNETES_GPU = "nvidia.com/gpu"
# Larger declared values are unknown: they come from corrupt input and would overflow what is stored.
MAX_DECLARED = 10**9


def _positive_int(value: Any) -> int | None:
    # Batch writes resource values as strings ("8"); Kubernetes quantities for GPUs are whole numbers.
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        # ASCII only: int() refuses other Unicode digits ("²"), and very long numbers are not declarations.
        value = int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None
    if isinstance(value, float) and value.is_integer():  # False for NaN and infinities
        value = int(value)
    return value if isinstance(value, int) and 0 < value <= MAX_DECLARED else None


def _known(total: int) -> int | None:
    return total if 0 < total <= MAX_DECLARED else None


def smallest(*limits: int | None) -> int | None:
    """The tightest of several limits that all apply to one job (None when none is known)."""
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def sagemaker_declared_runtime(description: Mapping[str, Any]) -> int | None:
    """``StoppingCondition.MaxRuntimeInSeconds`` of a training job description or CreateTrainingJob request."""
    condition = description.get("StoppingCondition")
    return _positive_int(condition.get("MaxRuntimeInSeconds")) if isinstance(condition, Mapping) else None


def sagemaker_requested_gpus(resource_config: Any) -> int | None:
    """GPUs of a ``ResourceConfig`` (instance count x GPUs per type, heterogeneous groups summed)."""
    if not isinstance(resource_config, Mapping):
        return None
    groups = [resource_config, *(resource_config.get("InstanceGroups") or [])]
    total = 0
    for group in groups:
        if not isinstance(group, Mapping) or "InstanceCount" not in group:
            continue
        count = group.get("InstanceCount")
        instance_type = group.get("InstanceType")
        per_instance = gpus_for_instance_type(instance_type if isinstance(instance_type, str) else None)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0 or per_instance is None:
            return None  # one group of unknown size makes the total unknown, not smaller
        total += count * per_instance
    return _known(total)


def batch_declared_runtime(detail: Mapping[str, Any]) -> int | None:
    """``timeout.attemptDurationSeconds`` of a Batch job (``timeoutConfig`` for a service job)."""
    for name in ("timeout", "timeoutConfig"):
        timeout = detail.get(name)
        if isinstance(timeout, Mapping):
            found = _positive_int(timeout.get("attemptDurationSeconds"))
            if found is not None:
                return found
    return None


def _requirement_gpus(requirements: Any) -> int:
    if not isinstance(requirements, list):
        return 0
    return sum(
        _positive_int(entry.get("value")) or 0
        for entry in requirements
        if isinstance(entry, Mapping) and entry.get("type") == "GPU"
    )


def kubernetes_container_gpus(containers: Any) -> int:
    """``nvidia.com/gpu`` of Kubernetes containers: limits (what the device plugin allocates), else requests."""
    total = 0
    for container in containers if isinstance(containers, list) else []:
        resources = container.get("resources") if isinstance(container, Mapping) else None
        if not isinstance(resources, Mapping):
            continue
        limits, requests = resources.get("limits"), resources.get("requests")
        value = limits.get(KUBERNETES_GPU) if isinstance(limits, Mapping) else None
        if value is None and isinstance(requests, Mapping):
            value = requests.get(KUBERNETES_GPU)
        total += _positive_int(value) or 0
    return total


def _containers_gpus(properties: Mapping[str, Any]) -> int:
    """GPUs of one node's (or a single-node job's) containers, whichever of the three forms it uses."""
    total = 0
    container = properties.get("container")
    if isinstance(container, Mapping):
        total += _requirement_gpus(container.get("resourceRequirements"))
    ecs = properties.get("ecsProperties")
    if isinstance(ecs, Mapping):
        for task in ecs.get("taskProperties") or []:
            for entry in (task.get("containers") or []) if isinstance(task, Mapping) else []:
                if isinstance(entry, Mapping):
                    total += _requirement_gpus(entry.get("resourceRequirements"))
    eks = properties.get("eksProperties")
    pod = eks.get("podProperties") if isinstance(eks, Mapping) else None
    if isinstance(pod, Mapping):
        total += kubernetes_container_gpus(pod.get("containers"))
    return total


def _range_nodes(target: Any, num_nodes: int) -> int:
    """Nodes of a ``targetNodes`` range: ``"2"``, ``"0:3"``, ``":3"``, ``"2:"`` (open ends: 0 and numNodes-1)."""
    if not isinstance(target, str) or not target.strip():
        return 0
    first, sep, last = target.strip().partition(":")
    if len(target) > 40:  # "0:999" is a range; thousands of digits are not (and int() would refuse them)
        return 0
    try:
        low = int(first) if first else 0
        high = (int(last) if last else num_nodes - 1) if sep else low
    except ValueError:
        return 0
    return max(0, high - low + 1)


def _multinode_gpus(node_properties: Mapping[str, Any]) -> int:
    num_nodes = _positive_int(node_properties.get("numNodes")) or 0
    ranges: Iterable[Any] = node_properties.get("nodeRangeProperties") or []
    return sum(
        _containers_gpus(node_range) * _range_nodes(node_range.get("targetNodes"), num_nodes)
        for node_range in ranges
        if isinstance(node_range, Mapping)
    )


def batch_requested_gpus(detail: Mapping[str, Any]) -> int | None:
    """GPUs a Batch job (``JobDetail``: event detail or DescribeJobs) asks for over all its nodes."""
    node_properties = detail.get("nodeProperties")
    if isinstance(node_properties, Mapping):
        return _known(_multinode_gpus(node_properties))
    return _known(_containers_gpus(detail))
