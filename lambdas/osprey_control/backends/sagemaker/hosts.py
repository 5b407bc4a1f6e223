"""A SageMaker training job's hosts from its ``ResourceConfig``, counted before they are built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from osprey_control.backends.limits import (
    MAX_INSTANCE_GROUPS,
    MAX_INSTANCE_TYPE,
    OverLimitError,
    check_host_count,
    check_text,
)
from osprey_control.catalog import gpus_for_instance_type
from osprey_control.registry import NodeKind, NodeRef

__all__ = ["sagemaker_hosts"]


def _instance_groups(
    resource_config: Mapping[str, Any], event_id: str | None
) -> list[tuple[int, str | None]]:
    """``(InstanceCount, InstanceType)`` of the config and its ``InstanceGroups``; groups without a count are
    skipped. The counts are checked here, before any host is built."""
    extra = resource_config.get("InstanceGroups") or []
    if not isinstance(extra, list):
        extra = []
    if len(extra) > MAX_INSTANCE_GROUPS:
        raise OverLimitError(
            f"ResourceConfig has {len(extra)} instance groups; Osprey reads at most {MAX_INSTANCE_GROUPS}",
            event_id=event_id,
        )
    groups: list[tuple[int, str | None]] = []
    for group in [resource_config, *extra]:
        count = group.get("InstanceCount") if isinstance(group, Mapping) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            continue
        instance_type = group.get("InstanceType") if isinstance(group, Mapping) else None
        if isinstance(instance_type, str):
            check_text(instance_type, "InstanceType", MAX_INSTANCE_TYPE, event_id)
        groups.append((count, instance_type if isinstance(instance_type, str) else None))
    check_host_count(sum(count for count, _ in groups), event_id)
    return groups


def sagemaker_hosts(job_name: str, resource_config: Any, event_id: str | None = None) -> tuple[NodeRef, ...]:
    """``<job>/algo-1`` ... ``<job>/algo-N`` (the ``Host`` dimension of /aws/sagemaker/TrainingJobs), with the
    GPUs per host when the instance type is known (the collector divides SageMaker's per-host GPU sums).
    :class:`OverLimitError` when the groups add up to more than ``MAX_HOSTS``."""
    if not isinstance(resource_config, Mapping):
        return ()
    groups = _instance_groups(resource_config, event_id)
    hosts: list[NodeRef] = []
    for count, instance_type in groups:
        gpus = gpus_for_instance_type(instance_type)
        first = len(hosts) + 1
        hosts.extend(
            NodeRef(
                node_id=f"{job_name}/algo-{first + index}",
                kind=NodeKind.HOST,
                gpus=gpus,
                instance_type=instance_type,
            )
            for index in range(count)
        )
    return tuple(hosts)
