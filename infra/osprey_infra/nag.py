"""cdk-nag AwsSolutions acknowledgements: how each construct acknowledges a finding on what it creates or grants.

There is no central list: the construct that makes a grant acknowledges the finding it causes, next to it, so
a grant and the reason it is acceptable move together. cdk-nag 3 wants the evidence in the id (e.g.
``IAM5[Resource::*]``), so each acknowledgement names the exact finding, on the construct it concerns, and says
why it does not apply.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

__all__ = ["acknowledge", "acknowledge_wildcard", "logical_id", "nag_arn"]

_ARN = "arn:<AWS::Partition>:{service}:<AWS::Region>:<AWS::AccountId>:{resource}"


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge the AwsSolutions ``rule`` (e.g. ``AwsSolutions-L1``) on ``scope`` and its children."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))


def acknowledge_wildcard(scope: IConstruct, resource: str, reason: str) -> None:
    """Acknowledge IAM5 (a wildcard in a policy's resource) for exactly ``resource``, as cdk-nag spells it."""
    acknowledge(scope, f"AwsSolutions-IAM5[Resource::{resource}]", reason)


def nag_arn(service: str, resource: str) -> str:
    """An ARN of this stack's account and region as cdk-nag prints it in a finding (``<AWS::Region>``...)."""
    return _ARN.format(service=service, resource=resource)


def logical_id(construct: IConstruct) -> str:
    """The logical ID of ``construct``'s CloudFormation resource, as a finding names it (``<Id.Arn>``)."""
    stack = cdk.Stack.of(construct)
    child = construct.node.default_child
    if not isinstance(child, cdk.CfnElement):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource")
    return str(stack.resolve(stack.get_logical_id(child)))
