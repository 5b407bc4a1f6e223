"""Backend ``eks`` (``osprey_control.backends.eks``), when the deployment names clusters (``osprey:eksClusters``).

EKS sends no job events, so its jobs are discovered: the discovery function (``osprey_handlers.eks_discovery``)
is a step of the cycle (the cycle state machine invokes it after taking the lease; it has no schedule of its
own). It registers the Osprey jobs it finds (the registry calls of ``JobRegistry.apply_observation``), reads the
policies (their ``coScheduling`` decides which jobs are gangs) and starts their gang watches.

``eks:DescribeCluster`` (the endpoint and CA) on the configured clusters only, for discovery, apply and the gang
watch; inside each cluster, each role's Kubernetes group decides what it may do (docs/eks.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from osprey_control.wiring import EKS_CLUSTERS_VARIABLE, EKS_NAMESPACES_VARIABLE, POLICY_PREFIX_VARIABLE
from osprey_infra.backends.grantees import BackendFunctionInputs
from osprey_infra.function import OspreyFunction
from osprey_infra.permissions import grant_policy_reads
from osprey_infra.table_access import EKS_DISCOVERY, grant_table_access

__all__ = ["EksBackend"]


class EksBackend(Construct):
    """``clusters``: the EKS clusters Osprey manages jobs on (at least one); ``namespaces``: the only ones
    discovery lists (empty: all)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        clusters: Sequence[str],
        inputs: BackendFunctionInputs,
        namespaces: Sequence[str] = (),
        writes: bool = True,
    ) -> None:
        """``writes``: False when EKS is pinned to shadow: the apply function is not given the clusters (its
        Kubernetes writes need them); the gang watch still reads readiness."""
        super().__init__(scope, construct_id)
        # "Default" adds nothing to the logical IDs: the function keeps those it had as the control plane's
        # child "EksDiscovery" (the composer gives this construct that id), so a deploy does not replace it.
        self.discovery = OspreyFunction(
            self,
            "Default",
            handler_module="eks_discovery",
            description="Osprey: discover Osprey jobs on EKS",
            environment={
                **inputs.environment,
                EKS_CLUSTERS_VARIABLE: ",".join(clusters),
                **({EKS_NAMESPACES_VARIABLE: ",".join(namespaces)} if namespaces else {}),
                POLICY_PREFIX_VARIABLE: inputs.policy_prefix,
            },
            layer=inputs.layer,
            code=inputs.code,
            timeout_seconds=120,
        )
        grant_table_access(inputs.table, self.discovery.role, EKS_DISCOVERY)
        grant_policy_reads(self.discovery, inputs.policy_prefix)
        inputs.grantees.gangs.allow_start(self.discovery.function)
        stack = cdk.Stack.of(self)
        describe = iam.PolicyStatement(
            actions=["eks:DescribeCluster"],
            resources=[
                stack.format_arn(service="eks", resource="cluster", resource_name=name) for name in clusters
            ],
        )
        roles = [self.discovery.role, inputs.grantees.gangs.watch.role]
        if writes:
            roles.append(inputs.grantees.apply.role)
        for role in roles:
            role.add_to_principal_policy(describe)
