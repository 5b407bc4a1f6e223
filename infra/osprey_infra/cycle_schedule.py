"""The EventBridge Scheduler schedule that starts a cycle every ``minutes`` minutes.

Below a minute the schedule still fires once a minute and passes ``{"cycles": N, "intervalSeconds": S}``; the
state machine then runs N cycles S seconds apart (its Wait/loop states), under the same lease.
"""

from __future__ import annotations

import json

from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

__all__ = ["CycleSchedule"]


class CycleSchedule(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        state_machine: sfn.IStateMachine,
        minutes: int,
        cycles_per_execution: int,
        interval_seconds: int,
    ) -> None:
        super().__init__(scope, construct_id)
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
            description="Osprey cycle schedule",
        )
        state_machine.grant_start_execution(role)
        payload: dict[str, int] = {}
        if cycles_per_execution > 1:
            payload = {"cycles": cycles_per_execution, "intervalSeconds": interval_seconds}
        self.schedule = scheduler.CfnSchedule(
            self,
            "Schedule",
            description="Starts one Osprey priority cycle",
            schedule_expression=f"rate({minutes} minute{'s' if minutes > 1 else ''})",
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            target=scheduler.CfnSchedule.TargetProperty(
                arn=state_machine.state_machine_arn,
                role_arn=role.role_arn,
                input=json.dumps(payload),
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    # A missed cycle is replaced by the next one a minute later; retrying late would overlap it.
                    maximum_event_age_in_seconds=60,
                    maximum_retry_attempts=0,
                ),
            ),
        )
