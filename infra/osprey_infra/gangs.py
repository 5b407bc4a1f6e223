"""Gang co-scheduling: the gang watch function (its own role), its state machine, and who may start it.

The ingest function starts one watch execution per co-scheduled job (named after the job, so replays start
nothing), and finds the state machine through ``OSPREY_GANG_STATE_MACHINE_ARN``. The watch function reads
readiness (training jobs by ARN; Batch's describes have no resource-level permissions), reads and writes only
its GANG items' actions on the registry (``osprey_infra.table_access.GANG_WATCH``), and stops only
Osprey-tagged jobs (``fail`` fallback), by IAM condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from osprey_control.wiring import GANG_STATE_MACHINE_VARIABLE
from osprey_infra.function import OspreyFunction
from osprey_infra.gang_watch import GangWatchStateMachine
from osprey_infra.permissions import SAGEMAKER_READS, TAGGED, training_jobs
from osprey_infra.table_access import GANG_WATCH, grant_table_access

__all__ = ["GANG_STATE_MACHINE_ENV", "GangWatch"]

GANG_STATE_MACHINE_ENV = GANG_STATE_MACHINE_VARIABLE


class GangWatch(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        environment: Mapping[str, str],
        layer: lambda_.ILayerVersion,
        code: lambda_.Code,
        backends: Sequence[str],
        eks_clusters: Sequence[str],
    ) -> None:
        super().__init__(scope, construct_id)
        self.watch = OspreyFunction(
            self,
            "Watch",
            handler_module="gang_watch",
            description="Osprey: one step of a gang's readiness watch",
            environment=environment,
            layer=layer,
            code=code,
            timeout_seconds=60,
        )
        self.state_machine = GangWatchStateMachine(
            self, "StateMachine", watch=self.watch.function
        ).state_machine
        self._grant(table, backends, eks_clusters)

    def allow_start(self, function: lambda_.Function) -> None:
        """Let ``function`` start watches, and tell it where the state machine is."""
        function.add_environment(GANG_STATE_MACHINE_ENV, self.state_machine.state_machine_arn)
        self.state_machine.grant_start_execution(function)

    def _grant(self, table: dynamodb.ITable, backends: Sequence[str], eks_clusters: Sequence[str]) -> None:
        stack = cdk.Stack.of(self)
        role = self.watch.role
        grant_table_access(table, role, GANG_WATCH)
        role.add_to_policy(iam.PolicyStatement(actions=SAGEMAKER_READS, resources=[training_jobs(stack)]))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["batch:DescribeJobs", "batch:DescribeServiceJob"],
                resources=["*"],  # Batch's Describe* have no resource-level permissions
            )
        )
        stops: list[tuple[str, str, str]] = []
        if "sagemaker" in backends:
            stops += [
                ("sagemaker:StopTrainingJob", "sagemaker", "training-job"),
                ("batch:TerminateServiceJob", "batch", "service-job"),
            ]
        if "batch" in backends:
            stops.append(("batch:TerminateJob", "batch", "job"))
        for action, service, resource in stops:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=[action],
                    resources=[stack.format_arn(service=service, resource=resource, resource_name="*")],
                    conditions=TAGGED,
                )
            )
        if "eks" in backends and eks_clusters:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["eks:DescribeCluster"],
                    resources=[
                        stack.format_arn(service="eks", resource="cluster", resource_name=name)
                        for name in eks_clusters
                    ],
                )
            )
