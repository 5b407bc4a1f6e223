"""Backend ``slurm`` (``osprey_control.backends.slurm``): ``SlurmBridge``, the function that reaches a Slurm
cluster's slurmrestd from inside its VPC (docs/slurm.md).

Created only when the context ``osprey:slurm`` names a cluster (:class:`~osprey_infra.slurm_config.
SlurmBridgeConfig`). It adds:

- one function (``osprey_handlers.slurm_discovery``) in the given subnets, with its own security group whose
  egress is slurmrestd's port on its host (the whole VPC's addresses when the URL names a host, not an IP)
  and HTTPS for the AWS APIs it calls (DynamoDB, Secrets Manager, EC2: through a NAT gateway or VPC
  endpoints, which the cluster's VPC provides); no ingress;
- optionally, on the head node's security group, ingress to slurmrestd's port from that group only;
- its role: ``secretsmanager:GetSecretValue`` on the JWT secret, ``ec2:DescribeInstances`` (the node →
  instance lookup; no resource-level permissions exist), the ENI actions every function in a VPC needs, and the
  registry calls of ``JobRegistry.apply_observation`` (``osprey_infra.table_access.SLURM_BRIDGE``);
- a rule that runs discovery every ``discoveryMinutes``;
- on the apply function: ``OSPREY_SLURM_BRIDGE_FUNCTION`` and ``lambda:InvokeFunction`` on this function only;
- co-scheduled Slurm jobs: the bridge's discovery starts their gang watches (``states:StartExecution``, reading
  the policies' ``coScheduling`` in SSM), and the gang watch function may invoke the bridge, and only it
  (readiness, the ``fail`` fallback).
"""

from __future__ import annotations

import ipaddress

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from osprey_control.wiring import (
    POLICY_PREFIX_VARIABLE,
    SLURM_ALLOW_SIGNING_KEY_VARIABLE,
    SLURM_BRIDGE_FUNCTION_VARIABLE,
    SLURM_CA_PEM_VARIABLE,
    SLURM_CLUSTER_VARIABLE,
    SLURM_INSECURE_HTTP_VARIABLE,
    SLURM_INSTANCE_TAG_VARIABLE,
    SLURM_MAX_RESPONSE_VARIABLE,
    SLURM_PRIORITY_RANGE_VARIABLE,
    SLURM_TOKEN_SECRET_VARIABLE,
    SLURM_URL_VARIABLE,
    SLURM_USER_VARIABLE,
)
from osprey_infra.backends.grantees import BackendFunctionInputs, BackendGrantees
from osprey_infra.function import OspreyFunction
from osprey_infra.nag import acknowledge_wildcard
from osprey_infra.permissions import grant_policy_reads
from osprey_infra.slurm_config import SlurmBridgeConfig
from osprey_infra.table_access import SLURM_BRIDGE, grant_table_access

__all__ = ["SlurmBridge"]

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
        inputs: BackendFunctionInputs,
        writes: bool = True,
    ) -> None:
        """``writes``: False when Slurm is pinned to shadow: apply may not invoke the bridge (its priority
        writes); the gang watch still may (readiness), and in shadow it sends no fallback."""
        super().__init__(scope, construct_id)
        self.config = config
        self.writes = writes
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
                **inputs.environment,
                SLURM_URL_VARIABLE: config.url,
                SLURM_CLUSTER_VARIABLE: config.cluster_name,
                SLURM_TOKEN_SECRET_VARIABLE: config.token_secret_arn,
                SLURM_USER_VARIABLE: config.user,
                SLURM_PRIORITY_RANGE_VARIABLE: config.priority_range,
                SLURM_INSTANCE_TAG_VARIABLE: config.instance_tag,
                SLURM_INSECURE_HTTP_VARIABLE: str(config.insecure_http).lower(),
                SLURM_ALLOW_SIGNING_KEY_VARIABLE: str(config.allow_signing_key).lower(),
                SLURM_MAX_RESPONSE_VARIABLE: str(config.max_response_bytes),
                **({SLURM_CA_PEM_VARIABLE: config.ca_certificate} if config.ca_certificate else {}),
                POLICY_PREFIX_VARIABLE: inputs.policy_prefix,
            },
            layer=inputs.layer,
            code=inputs.code,
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
        grant_table_access(inputs.table, role, SLURM_BRIDGE)
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
        self._connect(inputs.grantees, inputs.policy_prefix)
        acknowledge_wildcard(
            role,
            "*",
            "ec2:DescribeInstances and the network-interface actions of a function in a VPC have no "
            "resource-level permissions (AWSLambdaVPCAccessExecutionRole grants them on *).",
        )

    def _connect(self, grantees: BackendGrantees, policy_prefix: str) -> None:
        """Apply and the gang watch invoke the bridge (and only it), found by name; co-scheduled Slurm jobs:
        discovery starts their watches, reading the policies' coScheduling."""
        callers = (grantees.apply, grantees.gangs.watch) if self.writes else (grantees.gangs.watch,)
        for caller in callers:
            caller.function.add_environment(SLURM_BRIDGE_FUNCTION_VARIABLE, self.function_name)
            caller.role.add_to_principal_policy(
                iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.function_arn])
            )
        grantees.gangs.allow_start(self.bridge.function)
        grant_policy_reads(self.bridge, policy_prefix)
