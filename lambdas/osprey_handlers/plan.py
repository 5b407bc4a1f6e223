"""Plan Lambda: the plan step of the cycle (re-plan the parallelism of jobs that asked, write plan records).

Input ``{}`` (every shard) or ``{"shard": N}``, with the cycle's ``token`` and ``expiresAt`` (the lease's
fencing token, which its writes check, and its expiry, which bounds its deadline); output the step's summary (``PlanStepReport.to_dict()``):
``{"jobs", "requests", "skipped", "planned", "switches", "written", "withdrawn", "decisions", "missingData",
"records", "errors", "errorCount"}``."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field

from osprey_control.planner import DEFAULT_HYSTERESIS, DEFAULT_PLACEMENT_HYSTERESIS
from osprey_control.registry import Fence
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.plan import PlanStepConfig, run_plan_step
from osprey_control.wiring import (
    PLAN_EVERY_VARIABLE,
    PLAN_HYSTERESIS_VARIABLE,
    PLAN_PLACEMENT_HYSTERESIS_VARIABLE,
    PLAN_WINDOW_VARIABLE,
)
from osprey_handlers._settings import HandlerSettings

__all__ = ["PlanSettings", "handler"]

logger = Logger(service="osprey-plan")


class PlanSettings(HandlerSettings):
    """The function's environment (set by the CDK construct)."""

    hysteresis: float = Field(default=DEFAULT_HYSTERESIS, alias=PLAN_HYSTERESIS_VARIABLE, ge=0.0, lt=1.0)
    # A switch that only moves nodes between stages (a straggler off the critical one): replan's docstring.
    placement_hysteresis: float = Field(
        default=DEFAULT_PLACEMENT_HYSTERESIS, alias=PLAN_PLACEMENT_HYSTERESIS_VARIABLE, ge=0.0, lt=1.0
    )
    window_seconds: int = Field(default=600, alias=PLAN_WINDOW_VARIABLE, ge=60, le=86400)
    # Each job at most every 5 minutes: the cycle runs every minute, a job reads its plan every OSPREY_INTERVAL
    # steps, and every planning queries two CloudWatch series per job (its lead host's).
    every_seconds: int = Field(default=300, alias=PLAN_EVERY_VARIABLE, ge=0, le=86400)

    def step_config(self) -> PlanStepConfig:
        return PlanStepConfig(
            table_name=self.table_name,
            namespace=self.metrics_namespace,
            shards=self.shards,
            hysteresis=self.hysteresis,
            placement_hysteresis=self.placement_hysteresis,
            window_seconds=self.window_seconds,
            min_interval_seconds=self.every_seconds,
        )


@cache
def _settings() -> PlanSettings:
    return PlanSettings.model_validate(dict(os.environ))


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    event = event if isinstance(event, dict) else {}
    settings = _settings()
    shard, token, expires = event.get("shard"), event.get("token"), event.get("expiresAt")
    fence = Fence(settings.table_name, int(token)) if token is not None else None
    deadline = Deadline.for_invocation(
        context.get_remaining_time_in_millis,
        lease_expires_at=float(expires) if isinstance(expires, int | float) else None,
    )
    report = run_plan_step(
        settings.step_config(),
        shard=int(shard) if shard is not None else None,
        fence=fence,
        deadline=deadline,
    )
    return report.to_dict()
