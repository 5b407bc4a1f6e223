"""The job registry table (docs/registry.md): pk/sk, the sparse ``active-jobs`` and ``apply-pending`` indexes,
TTL on ``ttl``.

Mirrors ``osprey_control.registry.table`` (the definition tests and ``osprey local`` create directly); a test
keeps the two in step.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from osprey_control.registry import ACTIVE_INDEX, APPLY_PENDING_ATTRIBUTE, APPLY_PENDING_INDEX, TTL_ATTRIBUTE

__all__ = ["RegistryTable"]


class RegistryTable(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, retain: bool = True) -> None:
        super().__init__(scope, construct_id)
        # Table, not TableV2: TableV2 synthesizes AWS::DynamoDB::GlobalTable, which moto's CloudFormation
        # (``osprey local``) does not deploy.
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=retain,
            # Losing the registry loses every job's damping history and applied priority; keep it by default.
            removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
        )
        self.table.add_global_secondary_index(
            index_name=ACTIVE_INDEX,
            partition_key=dynamodb.Attribute(name="active_shard", type=dynamodb.AttributeType.NUMBER),
            sort_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        # The apply step's work list, one Query per shard (keys only: it re-reads each job consistently).
        self.table.add_global_secondary_index(
            index_name=APPLY_PENDING_INDEX,
            partition_key=dynamodb.Attribute(
                name=APPLY_PENDING_ATTRIBUTE, type=dynamodb.AttributeType.NUMBER
            ),
            sort_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )
