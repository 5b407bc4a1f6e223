"""Slurm node → EC2 instance, so the collector finds each node's CloudWatch agent metrics (``InstanceId``).

Slurm does not know instance ids; AWS ParallelCluster (3.x) does not put them in ``slurm.conf`` either. What
it does: compute nodes are named ``<queue>-<st|dy>-<compute resource>-<n>`` (``gpu-dy-p4d24xlarge-3``;
``st`` static, ``dy`` dynamic) and, when an instance backs a node, ``clustermgtd``/``slurm_resume`` set the
node's ``NodeAddr`` to the instance's **private IP** and its ``NodeHostname`` to the instance's private DNS
name (``ip-10-0-1-23``). HyperPod Slurm nodes likewise carry the instance's private address. So:

1. a node that reports an ``instance_id`` (Slurm 23.11+ ``scontrol update nodename=... instanceid=``) uses it;
2. otherwise the node's address (or the IP in an ``ip-a-b-c-d`` host name) is looked up with one
   ``ec2:DescribeInstances`` filtered on ``private-ip-address`` (and, when configured, the
   ``parallelcluster:cluster-name`` tag, so two clusters reusing an address space never mix), in chunks of
   :data:`FILTER_CHUNK` addresses;
3. a node without either (a powered-down cloud node: ``NodeAddr`` equals its name) maps to nothing, and the
   collector reads it by name, which finds no metrics: the job derives from its job-level signals.

:class:`StaticInstanceMap` is the same interface over a fixed mapping (tests, a site with its own inventory).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from osprey_control.aws import client_for
from osprey_control.errors import classified

__all__ = ["Ec2InstanceMap", "Instance", "InstanceMap", "StaticInstanceMap"]

CLUSTER_TAG = "parallelcluster:cluster-name"
FILTER_CHUNK = 200  # values per DescribeInstances filter, well under its limits
_IP_HOSTNAME = re.compile(r"^ip-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})(?:\..*)?$")


@dataclass(frozen=True)
class Instance:
    instance_id: str
    instance_type: str | None = None


class InstanceMap(Protocol):
    def resolve(self, nodes: Sequence[Mapping[str, Any]]) -> dict[str, Instance]:
        """Slurm node name → its instance, for the nodes (slurmrestd node objects) that have one."""
        ...


def node_address(node: Mapping[str, Any]) -> str | None:
    """The node's private IPv4 address: its ``address`` when that is an IP, else one read from an
    ``ip-a-b-c-d`` host name; None for a node without one (powered down, named by itself)."""
    for candidate in (node.get("address"), node.get("hostname"), node.get("name")):
        text = str(candidate or "")
        match = _IP_HOSTNAME.match(text)
        if match:
            text = ".".join(match.groups())
        try:
            return str(ipaddress.IPv4Address(text))
        except ValueError:
            continue
    return None


def _reported(node: Mapping[str, Any]) -> str | None:
    value = str(node.get("instance_id") or "").strip()
    return value if value.startswith("i-") else None


class StaticInstanceMap:
    """A fixed node name → instance mapping."""

    def __init__(self, instances: Mapping[str, Instance | str]) -> None:
        self._instances = {
            name: value if isinstance(value, Instance) else Instance(value)
            for name, value in instances.items()
        }

    def resolve(self, nodes: Sequence[Mapping[str, Any]]) -> dict[str, Instance]:
        names = {str(node.get("name")) for node in nodes}
        return {name: instance for name, instance in self._instances.items() if name in names}


class Ec2InstanceMap:
    """The ParallelCluster mapping of the module docstring (``ec2:DescribeInstances``, read-only)."""

    def __init__(self, *, cluster_name: str | None = None, client: Any = None) -> None:
        self.cluster_name = cluster_name
        self._client = client

    def resolve(self, nodes: Sequence[Mapping[str, Any]]) -> dict[str, Instance]:
        result: dict[str, Instance] = {}
        by_address: dict[str, list[str]] = {}
        for node in nodes:
            name = str(node.get("name"))
            reported = _reported(node)
            if reported:
                result[name] = Instance(reported)
                continue
            address = node_address(node)
            if address is not None:
                by_address.setdefault(address, []).append(name)
        for address, instance in self._describe(sorted(by_address)).items():
            for name in by_address[address]:
                result[name] = instance
        return result

    def _describe(self, addresses: Sequence[str]) -> dict[str, Instance]:
        if not addresses:
            return {}
        self._client = client_for("ec2", self._client)
        found: dict[str, Instance] = {}
        for start in range(0, len(addresses), FILTER_CHUNK):
            filters = [
                {"Name": "private-ip-address", "Values": list(addresses[start : start + FILTER_CHUNK])},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
            if self.cluster_name:
                filters.append({"Name": f"tag:{CLUSTER_TAG}", "Values": [self.cluster_name]})
            with classified():
                pages = self._client.get_paginator("describe_instances").paginate(Filters=filters)
                for instance in _instances(pages):
                    address = instance.get("PrivateIpAddress")
                    if address:
                        found[str(address)] = Instance(
                            str(instance["InstanceId"]), instance.get("InstanceType")
                        )
        return found


def _instances(pages: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    for page in pages:
        for reservation in page.get("Reservations") or []:
            yield from reservation.get("Instances") or []
