"""Who may do what: every IAM grant of the control plane's step functions, in one file.

Least privilege, concretely:

- the registry table: each function the DynamoDB actions its code calls (:mod:`osprey_infra.table_access`);
  the lease and finish functions only on the lease item (``dynamodb:LeadingKeys``);
- describes on resource ARNs where the service allows it (SageMaker training jobs, ECS container instances);
  AWS Batch's Describe* and CloudWatch's GetMetricData have no resource-level permissions, so ``*``;
- writes to SageMaker and Batch resources only when they carry ``osprey:enabled=true`` (``aws:ResourceTag``),
  and AddTags only of the tag Osprey writes (``aws:TagKeys``), so it cannot rewrite the opt-in or cost tags;
- custom rules only under the deployment's allowed prefix, in this account and region.

The gang watch's grants are in :mod:`osprey_infra.gangs` and the plan step's in :mod:`osprey_infra.planning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from osprey_control.backends.actuation import DERIVED_PRIORITY_TAG
from osprey_control.contract import ENABLED_TAG
from osprey_infra.table_access import (
    APPLY,
    APPLY_SHARES,
    COLLECT,
    DERIVE,
    EKS_DISCOVERY,
    FINISH,
    INGEST,
    LEASE,
    SHARDS,
    grant_table_access,
)

if TYPE_CHECKING:
    from osprey_infra.control_plane import OspreyControlPlane

__all__ = ["SAGEMAKER_READS", "TAGGED", "grant_control_plane", "training_jobs"]

TAGGED = {"StringEquals": {f"aws:ResourceTag/{ENABLED_TAG}": "true"}}
# SageMaker reads (DescribeTrainingJob, ListTags) that recognition, apply and the gang watch make.
SAGEMAKER_READS = ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"]


def training_jobs(scope: cdk.Stack) -> str:
    return scope.format_arn(service="sagemaker", resource="training-job", resource_name="*")


def grant_control_plane(plane: OspreyControlPlane, policy_prefix: str) -> None:
    """Every grant of the cycle's functions, ingest and EKS discovery."""
    table = plane.registry.table
    for made, access in (
        (plane.ingest, INGEST),
        (plane.lease, LEASE),
        (plane.finish, FINISH),
        (plane.shards, SHARDS),
        (plane.collect, COLLECT),
        (plane.derive, DERIVE),
        (plane.apply, APPLY),
        (plane.apply, APPLY_SHARES),
    ):
        grant_table_access(table, made.role, access)
    if plane.eks_discovery is not None:
        grant_table_access(table, plane.eks_discovery.role, EKS_DISCOVERY)
    _grant_ingest(plane)
    _grant_derive(plane, policy_prefix)
    _grant_apply(plane)
    _grant_eks(plane)


def _grant_ingest(plane: OspreyControlPlane) -> None:
    """Recognition by environment and node discovery: read-only describes."""
    stack = cdk.Stack.of(plane)
    role = plane.ingest.role
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=SAGEMAKER_READS, resources=[training_jobs(stack)])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["ecs:DescribeContainerInstances"],
            # container-instance/<cluster>/<id> (and the older container-instance/<id>)
            resources=[stack.format_arn(service="ecs", resource="container-instance", resource_name="*")],
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["batch:DescribeJobs", "batch:DescribeServiceJob"],
            resources=["*"],  # Batch's Describe* have no resource-level permissions
        )
    )


def _grant_derive(plane: OspreyControlPlane, policy_prefix: str) -> None:
    """Metrics (GetMetricData has no resource-level permissions), the policies, the allowed custom rules."""
    stack = cdk.Stack.of(plane)
    for reader in (plane.collect, plane.derive):
        reader.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["cloudwatch:GetMetricData"], resources=["*"])
        )
    name = policy_prefix.lstrip("/")
    read_policies = iam.PolicyStatement(
        actions=["ssm:GetParametersByPath", "ssm:GetParameter", "ssm:GetParameters"],
        resources=[
            stack.format_arn(service="ssm", resource="parameter", resource_name=name),
            stack.format_arn(service="ssm", resource="parameter", resource_name=name + "/*"),
        ],
    )
    readers = [plane.derive, plane.collect, plane.ingest]
    if plane.eks_discovery is not None:
        readers.append(plane.eks_discovery)
    for reader in readers:
        reader.role.add_to_principal_policy(read_policies)
    plane.derive.role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["lambda:InvokeFunction"],
            resources=[
                stack.format_arn(
                    service="lambda",
                    resource="function",
                    resource_name=f"{plane.config.allowed_rule_prefix}*",
                    arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
        )
    )


def _grant_apply(plane: OspreyControlPlane) -> None:
    """Reads of the jobs it applies to; writes only to Osprey-tagged resources."""
    stack = cdk.Stack.of(plane)
    role = plane.apply.role
    # The tag applier reads a training job's tags, and looks its ARN up when the registry has none yet.
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=SAGEMAKER_READS, resources=[training_jobs(stack)])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=[
                "batch:DescribeServiceJob",
                "batch:DescribeJobs",
                "batch:DescribeJobQueues",
                "batch:DescribeSchedulingPolicies",
            ],
            resources=["*"],  # Batch's Describe* have no resource-level permissions
        )
    )
    backends = plane.config.backends
    if "sagemaker" in backends:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["sagemaker:AddTags"],
                resources=[training_jobs(stack)],
                # ForAllValues alone also holds for a request without tag keys; Null rules that out.
                conditions={
                    **TAGGED,
                    "ForAllValues:StringEquals": {"aws:TagKeys": [DERIVED_PRIORITY_TAG]},
                    "Null": {"aws:TagKeys": "false"},
                },
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["batch:UpdateServiceJob"],
                resources=[stack.format_arn(service="batch", resource="service-job", resource_name="*")],
                conditions=TAGGED,
            )
        )
    if "batch" in backends:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["batch:UpdateSchedulingPolicy"],
                resources=[
                    stack.format_arn(service="batch", resource="scheduling-policy", resource_name="*")
                ],
                conditions=TAGGED,
            )
        )


def _grant_eks(plane: OspreyControlPlane) -> None:
    """DescribeCluster (endpoint and CA) on the configured clusters; inside them, each role's Kubernetes group
    decides what it may do (docs/eks.md)."""
    if plane.eks_discovery is None:
        return
    stack = cdk.Stack.of(plane)
    clusters = [
        stack.format_arn(service="eks", resource="cluster", resource_name=name)
        for name in plane.config.eks_clusters
    ]
    describe = iam.PolicyStatement(actions=["eks:DescribeCluster"], resources=clusters)
    plane.eks_discovery.role.add_to_principal_policy(describe)
    plane.apply.role.add_to_principal_policy(describe)
