"""Gang co-scheduling: the gang watch function (its own role), its state machine, and who may start it.

The ingest function starts one watch execution per co-scheduled job (named after the job, so replays start
nothing), and finds the state machine through ``OSPREY_GANG_STATE_MACHINE_ARN``; so do EKS discovery and the
Slurm bridge, which register jobs too. The watch function reads and writes only its GANG items' actions on the
registry (``osprey_infra.table_access.GANG_WATCH``). What it may do on a backend (read readiness; stop only
Osprey-tagged jobs, the ``fail`` fallback) is granted by that backend's construct (:mod:`osprey_infra.backends`),
through :attr:`GangWatch.watch`.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from osprey_control.wiring import GANG_STATE_MACHINE_VARIABLE
from osprey_infra.function import OspreyFunction
from osprey_infra.gang_watch import GangWatchStateMachine
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
        grant_table_access(table, self.watch.role, GANG_WATCH)

    def allow_start(self, function: lambda_.Function) -> None:
        """Let ``function`` start watches, and tell it where the state machine is."""
        function.add_environment(GANG_STATE_MACHINE_ENV, self.state_machine.state_machine_arn)
        self.state_machine.grant_start_execution(function)
