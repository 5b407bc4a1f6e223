"""Finish Lambda: the cycle's last step on every path. Publishes CycleDurationMs and the outcome, releases
the lease. Input ``{"owner", "startedAt" (ISO 8601), "outcome": "succeeded"|"failed"|"skipped", "error"?}``."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from functools import cache
from typing import Any, Literal

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from osprey_control.coordination import CycleLease
from osprey_control.telemetry import MetricPoint
from osprey_handlers._telemetry import publish

__all__ = ["FinishEvent", "FinishSettings", "handler"]

logger = Logger(service="osprey-finish")


class FinishSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    table_name: str = Field(alias="OSPREY_TABLE_NAME", min_length=3)
    metrics_namespace: str = Field(default="/aws/osprey", alias="OSPREY_METRICS_NAMESPACE", min_length=1)


class FinishEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    owner: str = Field(min_length=1)
    started_at: datetime = Field(alias="startedAt")
    outcome: Literal["succeeded", "failed"]
    error: Any = None


@cache
def _components() -> tuple[FinishSettings, CycleLease]:
    settings = FinishSettings.model_validate(dict(os.environ))
    return settings, CycleLease(settings.table_name)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings, lease = _components()
    finish = FinishEvent.model_validate(event)
    started = finish.started_at if finish.started_at.tzinfo else finish.started_at.replace(tzinfo=UTC)
    duration_ms = max(0.0, (datetime.now(UTC) - started).total_seconds() * 1000)
    released = lease.release(finish.owner)
    failed = finish.outcome == "failed"
    if failed:
        logger.error("cycle failed", extra={"owner": finish.owner, "error": finish.error})
    publish(
        [
            MetricPoint("CycleDurationMs", "Milliseconds", (round(duration_ms, 1),)),
            MetricPoint("CyclesFailed" if failed else "CyclesSucceeded", "Count", (1.0,)),
        ],
        settings.metrics_namespace,
    )
    return {"outcome": finish.outcome, "durationMs": round(duration_ms, 1), "released": released}
