"""The control plane's shared grants: what its own steps may do, whichever backends are on.

Least privilege, concretely:

- the registry table: each function the DynamoDB actions its code calls, its writes only on the item types it
  owns (``dynamodb:LeadingKeys`` on their partition-key prefixes, :mod:`osprey_infra.table_access`); only the
  lease and finish functions write the lease item;
- CloudWatch's GetMetricData, which has no resource-level permissions, so ``*``: the collect and derive steps
  (and the plan step, :mod:`osprey_infra.planning`);
- the policies in SSM, under the deployment's policy prefix only: ingest, collect and derive (and EKS discovery
  and the Slurm bridge, which read them with :func:`grant_policy_reads` too);
- custom rules only under the deployment's allowed prefix, in this account and region.

What a backend's code calls (SageMaker, Batch, EKS, the Slurm bridge: reads by ingest, apply and the gang
watch; writes only of resources tagged ``osprey:enabled=true``, :data:`TAGGED`) is granted by that backend's
construct in :mod:`osprey_infra.backends`. Each grant that needs a wildcard acknowledges its cdk-nag finding
where it is made.

A grant takes the smallest thing it needs: a :class:`Grantee` (a role), or a :class:`FunctionGrantee` (a
function and its role) when it also tells the function where to find what it may now call.
"""

from __future__ import annotations

from typing import Protocol

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from osprey_control.contract import ENABLED_TAG, OPT_IN
from osprey_infra.nag import acknowledge_wildcard, nag_arn
from osprey_infra.table_access import (
    APPLY,
    COLLECT,
    DERIVE,
    FINISH,
    INGEST,
    LEASE,
    SHARDS,
    grant_table_access,
)

__all__ = [
    "TAGGED",
    "FunctionGrantee",
    "Grantee",
    "grant_metric_reads",
    "grant_policy_reads",
    "grant_steps",
]

# The condition on every write to a backend's resources: only those opted in with osprey:enabled=true.
TAGGED = {"StringEquals": {f"aws:ResourceTag/{ENABLED_TAG}": OPT_IN}}  # exact: contract.opt_in


class Grantee(Protocol):
    """What a grant needs of a function: its role."""

    @property
    def role(self) -> iam.IRole: ...


class FunctionGrantee(Grantee, Protocol):
    """A function and its role: for grants that also set the function's environment."""

    @property
    def function(self) -> lambda_.Function: ...


def grant_steps(
    table: dynamodb.ITable,
    *,
    ingest: Grantee,
    lease: Grantee,
    shards: Grantee,
    collect: Grantee,
    derive: Grantee,
    apply: Grantee,
    finish: Grantee,
    policy_prefix: str,
    allowed_rule_prefix: str,
) -> None:
    """The shared grants of ingest and the cycle's steps: the registry, metrics, the policies, custom rules."""
    for grantee, access in (
        (ingest, INGEST),
        (lease, LEASE),
        (finish, FINISH),
        (shards, SHARDS),
        (collect, COLLECT),
        (derive, DERIVE),
        (apply, APPLY),
    ):
        grant_table_access(table, grantee.role, access)
    for reader in (collect, derive):
        grant_metric_reads(reader)
    for reader in (derive, collect, ingest):
        grant_policy_reads(reader, policy_prefix)
    _grant_custom_rules(derive, allowed_rule_prefix)


def grant_metric_reads(grantee: Grantee) -> None:
    """CloudWatch's GetMetricData, on ``*``: it has no resource-level permissions."""
    grantee.role.add_to_principal_policy(
        iam.PolicyStatement(actions=["cloudwatch:GetMetricData"], resources=["*"])
    )
    acknowledge_wildcard(grantee.role, "*", "cloudwatch:GetMetricData has no resource-level permissions.")


def grant_policy_reads(grantee: Grantee, policy_prefix: str) -> None:
    """Reads of the policies Osprey deploys: the parameters under ``policy_prefix``, and nothing else in SSM."""
    stack = cdk.Stack.of(grantee.role)
    name = policy_prefix.lstrip("/")
    grantee.role.add_to_principal_policy(
        iam.PolicyStatement(
            # History: an invalid policy's jobs are derived under its last good version (policy_store.py).
            actions=[
                "ssm:GetParametersByPath",
                "ssm:GetParameter",
                "ssm:GetParameters",
                "ssm:GetParameterHistory",
            ],
            resources=[
                stack.format_arn(service="ssm", resource="parameter", resource_name=name),
                stack.format_arn(service="ssm", resource="parameter", resource_name=name + "/*"),
            ],
        )
    )
    acknowledge_wildcard(
        grantee.role,
        nag_arn("ssm", f"parameter/{name}/*"),
        f"The policies Osprey deploys, one parameter each under {policy_prefix}.",
    )


def _grant_custom_rules(derive: Grantee, allowed_rule_prefix: str) -> None:
    """Invoking custom rules: functions of this account and region whose name has the allowed prefix."""
    stack = cdk.Stack.of(derive.role)
    derive.role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["lambda:InvokeFunction"],
            resources=[
                stack.format_arn(
                    service="lambda",
                    resource="function",
                    resource_name=f"{allowed_rule_prefix}*",
                    arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
        )
    )
    acknowledge_wildcard(
        derive.role,
        nag_arn("lambda", f"function:{allowed_rule_prefix}*"),
        "Custom rules: only functions of this account whose name has the deployment's allowed prefix.",
    )


def grant_config_read(grantee: Grantee, parameter: str) -> None:
    """GetParameter of the deployment's config parameter (``/osprey/config``) alone: the apply step and the gang
    watch read the shadow/enforce mode from it on every invocation."""
    stack = cdk.Stack.of(grantee.role)
    grantee.role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["ssm:GetParameter"],
            resources=[
                stack.format_arn(service="ssm", resource="parameter", resource_name=parameter.lstrip("/"))
            ],
        )
    )
