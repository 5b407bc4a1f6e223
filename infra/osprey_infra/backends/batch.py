"""Backend ``batch`` (``osprey_control.backends.batch``): AWS Batch container jobs, multi-node ones included.

It has no resources of its own; it grants what its code calls:

- Batch's describes, on ``*`` (none of Batch's Describe* has resource-level permissions), whichever backends are
  on: ingest and the gang watch DescribeJobs and DescribeServiceJob, apply those and DescribeJobQueues and
  DescribeSchedulingPolicies (the share applier finds each job's fair-share policy through its queue). The service
  jobs of the ``sagemaker-queued`` backend are read here too: one statement per function holds every Batch
  describe, as none can be narrowed;
- to ingest, DescribeContainerInstances (the EC2 instance a Batch job's event names, for Spot interruption
  warnings), on container instances of any cluster;
- with the backend on: UpdateSchedulingPolicy (the weight of a job's share) to apply and TerminateJob (the gang
  ``fail`` fallback) to the gang watch, both only on resources tagged ``osprey:enabled=true``.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from osprey_infra.backends.grantees import BackendGrantees
from osprey_infra.nag import acknowledge_wildcard, nag_arn
from osprey_infra.permissions import TAGGED

__all__ = ["BatchBackend"]

_DESCRIBES = "AWS Batch's Describe* actions (DescribeJobs, DescribeServiceJob, ...) have no resource-level permissions."


class BatchBackend(Construct):
    """``enabled``: the deployment's ``backends`` include ``batch`` (the writes)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, grantees: BackendGrantees, enabled: bool
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        ingest, apply, watch = grantees.ingest.role, grantees.apply.role, grantees.gangs.watch.role
        container_instances = stack.format_arn(
            service="ecs", resource="container-instance", resource_name="*"
        )
        ingest.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:DescribeContainerInstances"],
                # container-instance/<cluster>/<id> (and the older container-instance/<id>)
                resources=[container_instances],
            )
        )
        for reader in (ingest, watch):
            reader.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["batch:DescribeJobs", "batch:DescribeServiceJob"], resources=["*"]
                )
            )
        apply.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "batch:DescribeServiceJob",
                    "batch:DescribeJobs",
                    "batch:DescribeJobQueues",
                    "batch:DescribeSchedulingPolicies",
                ],
                resources=["*"],
            )
        )
        if enabled:
            apply.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["batch:UpdateSchedulingPolicy"],
                    resources=[
                        stack.format_arn(service="batch", resource="scheduling-policy", resource_name="*")
                    ],
                    conditions=TAGGED,
                )
            )
            watch.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["batch:TerminateJob"],
                    resources=[stack.format_arn(service="batch", resource="job", resource_name="*")],
                    conditions=TAGGED,
                )
            )
        for reader in (ingest, apply, watch):
            acknowledge_wildcard(reader, "*", _DESCRIBES)
        acknowledge_wildcard(
            ingest,
            nag_arn("ecs", "container-instance/*"),
            "DescribeContainerInstances of the instance a Batch job's event names (its EC2 instance id); any cluster.",
        )
        acknowledge_wildcard(
            apply,
            nag_arn("batch", "scheduling-policy/*"),
            "Writes only resources tagged osprey:enabled=true (aws:ResourceTag condition on the statement).",
        )
        acknowledge_wildcard(
            watch,
            nag_arn("batch", "job/*"),
            "Stops only jobs tagged osprey:enabled=true (aws:ResourceTag condition).",
        )
