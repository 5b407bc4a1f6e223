"""cdk-nag AwsSolutions acknowledgements for the control plane: each one names the exact finding (cdk-nag 3
wants the evidence, e.g. ``IAM5[Resource::*]``) on the construct it concerns, and why it does not apply."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import aws_cdk as cdk
from constructs import IConstruct

if TYPE_CHECKING:
    from osprey_infra.control_plane import OspreyControlPlane

__all__ = ["acknowledge_findings"]

_ARN = "arn:<AWS::Partition>:{service}:<AWS::Region>:<AWS::AccountId>:{resource}"


def _iam5(scope: IConstruct, resource: str, reason: str) -> None:
    cdk.Validations.of(scope).acknowledge(
        cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{resource}]", reason=reason)
    )


def _logical_id(construct: IConstruct) -> str:
    stack = cdk.Stack.of(construct)
    child = construct.node.default_child
    if not isinstance(child, cdk.CfnElement):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource")
    return str(stack.resolve(stack.get_logical_id(child)))


def acknowledge_findings(plane: OspreyControlPlane) -> None:
    for made in plane.functions().values():
        cdk.Validations.of(made.function).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions::AwsSolutions-L1",
                reason="Pinned to the newest runtime the AWS-managed Powertools v3 layer is published for; "
                "raise function.RUNTIME together with the layer.",
            )
        )
    describes = "AWS Batch's Describe* actions (DescribeJobs, DescribeServiceJob, ...) have no resource-level permissions."
    _iam5(plane.ingest.role, "*", describes)
    _iam5(plane.apply.role, "*", describes)
    _iam5(plane.gangs.watch.role, "*", describes)
    _iam5(plane.collect.role, "*", "cloudwatch:GetMetricData has no resource-level permissions.")
    _iam5(plane.derive.role, "*", "cloudwatch:GetMetricData has no resource-level permissions.")
    _iam5(plane.planning.plan.role, "*", "cloudwatch:GetMetricData has no resource-level permissions.")
    training_jobs = _ARN.format(service="sagemaker", resource="training-job/*")
    _iam5(
        plane.ingest.role,
        training_jobs,
        "Reads (DescribeTrainingJob, ListTags) of the training jobs whose events it records; any name.",
    )
    _iam5(
        plane.ingest.role,
        _ARN.format(service="ecs", resource="container-instance/*"),
        "DescribeContainerInstances of the instance a Batch job's event names (its EC2 instance id); any cluster.",
    )
    _iam5(
        plane.gangs.watch.role,
        training_jobs,
        "Reads training jobs; stops only those tagged osprey:enabled=true (aws:ResourceTag condition).",
    )
    for resource in (
        _ARN.format(service="batch", resource="service-job/*"),
        _ARN.format(service="batch", resource="job/*"),
    ):
        _iam5(
            plane.gangs.watch.role,
            resource,
            "Stops only jobs tagged osprey:enabled=true (aws:ResourceTag condition).",
        )
    _iam5(
        plane.apply.role,
        training_jobs,
        "Reads training jobs; AddTags only on those tagged osprey:enabled=true and only of the key "
        "osprey:derived-priority (aws:ResourceTag and aws:TagKeys conditions).",
    )
    tagged = "Writes only resources tagged osprey:enabled=true (aws:ResourceTag condition on the statement)."
    for resource in (
        _ARN.format(service="batch", resource="service-job/*"),
        _ARN.format(service="batch", resource="scheduling-policy/*"),
    ):
        _iam5(plane.apply.role, resource, tagged)
    _iam5(
        plane.derive.role,
        _ARN.format(service="lambda", resource=f"function:{plane.config.allowed_rule_prefix}*"),
        "Custom rules: only functions of this account whose name has the deployment's allowed prefix.",
    )
    readers = [plane.collect.role, plane.derive.role, plane.ingest.role]
    if plane.eks_discovery is not None:
        readers.append(plane.eks_discovery.role)
    for reader in readers:
        _iam5(
            reader,
            _ARN.format(service="ssm", resource="parameter/osprey/policies/*"),
            "The policies Osprey deploys, one parameter each under /osprey/policies.",
        )
    machine = plane.cycle.state_machine
    for logged in (machine, plane.gangs.state_machine):
        _iam5(
            logged,
            "*",
            "X-Ray tracing and CloudWatch Logs delivery actions have no resource-level permissions.",
        )
    for made in plane.functions().values():
        _iam5(
            machine,
            f"<{_logical_id(made.function)}.Arn>:*",
            "CDK's LambdaInvoke grant covers the step's function and its versions.",
        )
    _iam5(
        plane.gangs.state_machine,
        f"<{_logical_id(plane.gangs.watch.function)}.Arn>:*",
        "CDK's LambdaInvoke grant covers the watch function and its versions.",
    )
    own_executions = json.dumps(
        {"Fn::Select": [6, {"Fn::Split": [":", {"Ref": _logical_id(machine)}]}]}, separators=(",", ":")
    )
    for suffix in ("/*:*", ":*"):
        _iam5(
            machine,
            _ARN.format(service="states", resource=f"execution:{own_executions}{suffix}"),
            "The Distributed Map starts and reads child executions of this state machine only.",
        )
