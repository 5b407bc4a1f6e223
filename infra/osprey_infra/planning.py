"""The plan step: the function that re-plans the parallelism of jobs that asked (``osprey.request_planning``)
and writes their plan records (``osprey.adjust_parallelism`` reads them). docs/planner.md, "Plan step".

Its role may read the active jobs (Query on the active-jobs index) and their plan requests (BatchGetItem), write
plan records and mark requests planned (``osprey_infra.table_access.PLAN``), and read CloudWatch metrics
(``GetMetricData`` has no resource-level permissions). Nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from osprey_control.wiring import TABLE_NAME_VARIABLE
from osprey_infra.function import OspreyFunction
from osprey_infra.permissions import grant_metric_reads
from osprey_infra.table_access import PLAN, grant_table_access

__all__ = ["Planning"]


class Planning(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        environment: Mapping[str, str],
        layer: lambda_.ILayerVersion,
        code: lambda_.Code,
        # A step of the Express cycle (five minutes in all); the plan step stops early when time runs short.
        timeout_seconds: int = 90,
    ) -> None:
        super().__init__(scope, construct_id)
        self.plan = OspreyFunction(
            self,
            "Plan",
            handler_module="plan",
            description="Osprey: re-plan job parallelism from measured network speed",
            environment={TABLE_NAME_VARIABLE: table.table_name, **environment},
            layer=layer,
            code=code,
            timeout_seconds=timeout_seconds,
            memory_size=1024,  # the search is CPU-bound; Lambda's CPU share grows with memory
        )
        grant_table_access(table, self.plan.role, PLAN)
        grant_metric_reads(self.plan)

    @property
    def function(self) -> lambda_.Function:
        return self.plan.function
