"""``SlurmBridge``: the function that reaches a Slurm cluster's slurmrestd from inside its VPC (docs/slurm.md).

Created only when the context ``osprey:slurm`` names a cluster (:class:`~osprey_infra.slurm_config.
SlurmBridgeConfig`). It adds:

- one function (``osprey_handlers.slurm_discovery``) in the given subnets, with its own security group whose
  egress is slurmrestd's port on its host (the whole VPC's addresses when the URL names a host, not an IP)
  and HTTPS for the AWS APIs it calls (DynamoDB, Secrets Manager, EC2: through a NAT gateway or VPC
  endpoints, which the cluster's VPC provides); no ingress;
- optionally, on the head node's security group, ingress to slurmrestd's port from that group only;
- its role: ``secretsmanager:GetSecretValue`` on the JWT secret, ``ec2:DescribeInstances`` (the node →
  instance lookup; no resource-level permissions exist), the ENI actions every function in a VPC needs, and the
  registry calls of ``JobRegistry.apply_observation`` (GetItem, PutItem);
- a rule that runs discovery every ``discoveryMinutes``;
- on the apply function: ``OSPREY_SLURM_BRIDGE_FUNCTION`` and ``lambda:InvokeFunction`` on this function only;
- with :meth:`SlurmBridge.connect_gangs`: the bridge starts gang watches (``states:StartExecution``, the
  policies in SSM), and the gang watch function may invoke the bridge (readiness, the ``fail`` fallback).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from osprey_control.wiring import (
    POLICY_PREFIX_VARIABLE,
    SLURM_BRIDGE_FUNCTION_VARIABLE,
    SLURM_CLUSTER_VARIABLE,
    SLURM_INSTANCE_TAG_VARIABLE,
    SLURM_PRIORITY_RANGE_VARIABLE,
    SLURM_TOKEN_SECRET_VARIABLE,
    SLURM_URL_VARIABLE,
    SLURM_USER_VARIABLE,
)
from osprey_infra.function import OspreyFunction
from osprey_infra.gangs import GangWatch
from osprey_infra.slurm_config import SlurmBridgeConfig
from osprey_infra.table_access import TableAccess, grant_table_access

__all__ = ["SLURM_BRIDGE_ACCESS", "SlurmBridge"]

# JobRegistry.apply_observation (GetItem, PutItem; the instance links are PutItems, their risk GetItems).
SLURM_BRIDGE_ACCESS = TableAccess(("dynamodb:GetItem", "dynamodb:PutItem"))
# What a function attached to a VPC needs to manage its network interfaces (AWSLambdaVPCAccessExecutionRole).
_ENI_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
]


def _destination(host: str) -> str:
    try:
        return f"{ipaddress.IPv4Address(host)}/32"
    except ValueError:
        return "0.0.0.0/0"  # a DNS name: its address is not known at synth


def _function_name(stack: cdk.Stack, cluster: str) -> str:
    """``<stack>-slurm-<cluster>`` (at most 64 characters), or ``osprey-slurm-<cluster>`` for a stack whose
    name is only known at deploy time."""
    prefix = "osprey" if cdk.Token.is_unresolved(stack.stack_name) else stack.stack_name
    return f"{prefix}-slurm-{cluster}"[:64]


class SlurmBridge(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SlurmBridgeConfig,
        table: dynamodb.ITable,
        environment: Mapping[str, str],
        layer: lambda_.ILayerVersion,
        code: lambda_.Code,
        apply: OspreyFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.security_group = ec2.CfnSecurityGroup(
            self,
            "SecurityGroup",
            vpc_id=config.vpc_id,
            group_description=f"Osprey Slurm bridge to slurmrestd of {config.cluster_name}",
            security_group_egress=[
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="tcp",
                    from_port=config.port,
                    to_port=config.port,
                    cidr_ip=_destination(config.host),
                    description="slurmrestd",
                ),
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="tcp",
                    from_port=443,
                    to_port=443,
                    cidr_ip="0.0.0.0/0",
                    description="AWS APIs (DynamoDB, Secrets Manager, EC2) through NAT or VPC endpoints",
                ),
            ],
        )
        if config.head_node_security_group_id:
            ec2.CfnSecurityGroupIngress(
                self,
                "HeadNodeIngress",
                group_id=config.head_node_security_group_id,
                ip_protocol="tcp",
                from_port=config.port,
                to_port=config.port,
                source_security_group_id=self.security_group.attr_group_id,
                description="Osprey Slurm bridge to slurmrestd",
            )
        self.bridge = OspreyFunction(
            self,
            "Function",
            handler_module="slurm_discovery",
            description=f"Osprey: Slurm bridge to {config.cluster_name} (discovery and priorities)",
            environment={
                **environment,
                SLURM_URL_VARIABLE: config.url,
                SLURM_CLUSTER_VARIABLE: config.cluster_name,
                SLURM_TOKEN_SECRET_VARIABLE: config.token_secret_arn,
                SLURM_USER_VARIABLE: config.user,
                SLURM_PRIORITY_RANGE_VARIABLE: config.priority_range,
                SLURM_INSTANCE_TAG_VARIABLE: config.instance_tag,
            },
            layer=layer,
            code=code,
            timeout_seconds=60,
        )
        function = self.bridge.function
        cfn = function.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        # A known name: the functions that invoke the bridge name it without referencing it, which would close a
        # dependency cycle (the gang watch's policy -> the bridge -> its StartExecution grant -> the watch).
        self.function_name = _function_name(cdk.Stack.of(self), config.cluster_name)
        cfn.function_name = self.function_name
        self.function_arn = cdk.Stack.of(self).format_arn(
            service="lambda",
            resource="function",
            resource_name=self.function_name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        cfn.vpc_config = lambda_.CfnFunction.VpcConfigProperty(
            security_group_ids=[self.security_group.attr_group_id], subnet_ids=list(config.subnet_ids)
        )
        role = self.bridge.role
        role.add_to_policy(iam.PolicyStatement(actions=_ENI_ACTIONS, resources=["*"]))
        role.add_to_policy(iam.PolicyStatement(actions=["ec2:DescribeInstances"], resources=["*"]))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue"], resources=[config.token_secret_arn]
            )
        )
        grant_table_access(table, role, SLURM_BRIDGE_ACCESS)
        self.schedule = events.Rule(
            self,
            "Discovery",
            description=f"Osprey: discover the Osprey jobs of Slurm cluster {config.cluster_name}",
            schedule=events.Schedule.rate(cdk.Duration.minutes(config.discovery_minutes)),
            targets=[
                targets.LambdaFunction(
                    function,
                    event=events.RuleTargetInput.from_object({"action": "discover"}),
                    retry_attempts=0,
                )
            ],
        )
        apply.function.add_environment(SLURM_BRIDGE_FUNCTION_VARIABLE, self.function_name)
        apply.role.add_to_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.function_arn])
        )
        self._acknowledge()

    def connect_gangs(self, gangs: GangWatch, policy_prefix: str) -> None:
        """Co-scheduled Slurm jobs: discovery starts their watches (reading the policies' coScheduling), and
        the watch function reads their readiness (and applies ``fail``) through the bridge."""
        gangs.allow_start(self.bridge.function)
        self.bridge.function.add_environment(POLICY_PREFIX_VARIABLE, policy_prefix)
        stack = cdk.Stack.of(self)
        name = policy_prefix.lstrip("/")
        self.bridge.role.add_to_policy(
            iam.PolicyStatement(
                actions=["ssm:GetParametersByPath", "ssm:GetParameter", "ssm:GetParameters"],
                resources=[
                    stack.format_arn(service="ssm", resource="parameter", resource_name=name),
                    stack.format_arn(service="ssm", resource="parameter", resource_name=name + "/*"),
                ],
            )
        )
        cdk.Validations.of(self.bridge.role).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ssm:<AWS::Region>:"
                f"<AWS::AccountId>:parameter/{name}/*]",
                reason=f"The policies Osprey deploys, one parameter each under {policy_prefix}.",
            )
        )
        watch = gangs.watch
        watch.function.add_environment(SLURM_BRIDGE_FUNCTION_VARIABLE, self.function_name)
        watch.role.add_to_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.function_arn])
        )

    def _acknowledge(self) -> None:
        cdk.Validations.of(self.bridge.function).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions::AwsSolutions-L1",
                reason="Pinned to the newest runtime the AWS-managed Powertools v3 layer is published for; "
                "raise function.RUNTIME together with the layer.",
            )
        )
        cdk.Validations.of(self.bridge.role).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="ec2:DescribeInstances and the network-interface actions of a function in a VPC have no "
                "resource-level permissions (AWSLambdaVPCAccessExecutionRole grants them on *).",
            )
        )

    @classmethod
    def compose(
        cls,
        scope: Construct,
        config: SlurmBridgeConfig | None,
        *,
        table: dynamodb.ITable,
        environment: Mapping[str, str],
        layer: lambda_.ILayerVersion,
        code: lambda_.Code,
        apply: OspreyFunction,
    ) -> SlurmBridge | None:
        """The bridge when ``config`` is set (the control plane's one line), else None."""
        if config is None:
            return None
        return cls(
            scope,
            "Slurm",
            config=config,
            table=table,
            environment=environment,
            layer=layer,
            code=code,
            apply=apply,
        )
