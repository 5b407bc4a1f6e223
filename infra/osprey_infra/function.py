"""One Osprey Lambda: its own role (least privilege: the caller grants what it needs), its own log group,
the shared code asset (``lambdas/``) and the AWS-managed Powertools layer. cdk-nag's L1 (not the newest
runtime) is acknowledged here, next to :data:`RUNTIME`, for every function.

Bundling needs no Docker: the functions depend only on Powertools and pydantic (both in the managed layer)
and on boto3 (in the runtime); nothing on a handler's import path imports PyYAML.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from osprey_infra.nag import acknowledge

__all__ = ["ARCHITECTURE", "LAMBDAS_DIR", "RUNTIME", "OspreyFunction", "powertools_layer_arn"]

LAMBDAS_DIR = Path(__file__).resolve().parents[2] / "lambdas"
# The newest runtime the AWS-managed Powertools v3 layer is published for.
RUNTIME = lambda_.Runtime.PYTHON_3_13
# Graviton: 20 % less per GB-second than x86_64. Every dependency is pure Python except pydantic-core, which
# the Powertools layer ships built for the layer's architecture; the managed layer is published for arm64 under
# the same version numbers as x86_64, so the architecture and the layer name change together, here only.
ARCHITECTURE = lambda_.Architecture.ARM_64
_LAYER_NAME = f"AWSLambdaPowertoolsPythonV3-python313-{ARCHITECTURE.name}"
_POWERTOOLS_ACCOUNT = "017000801446"


def powertools_layer_arn(version: int) -> str:
    return (
        f"arn:{cdk.Aws.PARTITION}:lambda:{cdk.Aws.REGION}:{_POWERTOOLS_ACCOUNT}:layer:{_LAYER_NAME}:{version}"
    )


class OspreyFunction(Construct):
    """``handler_module`` is the module in ``osprey_handlers`` whose ``handler`` is the entry point."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler_module: str,
        description: str,
        environment: Mapping[str, str],
        layer: lambda_.ILayerVersion,
        code: lambda_.Code,
        timeout_seconds: int = 60,
        memory_size: int = 512,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Osprey {handler_module} function",
        )
        # Instead of the AWSLambdaBasicExecutionRole managed policy (account-wide log groups): this log group only.
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=f"osprey_handlers.{handler_module}.handler",
            code=code,
            layers=[layer],
            role=self.role,
            description=description,
            environment=dict(environment),
            timeout=cdk.Duration.seconds(timeout_seconds),
            memory_size=memory_size,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
        )
        self.function.node.add_dependency(self.role)
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            "Pinned to the newest runtime the AWS-managed Powertools v3 layer is published for; "
            "raise function.RUNTIME together with the layer.",
        )
