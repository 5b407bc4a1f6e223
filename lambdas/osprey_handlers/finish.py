"""Finish Lambda: the cycle's last step on every path. Publishes CycleDurationMs, the outcome, FailedShards and
FailedJobs (``osprey_control.telemetry.cycle_metrics``), releases the lease. Input ``{"owner", "startedAt"
(ISO 8601), "outcome": "succeeded"|"failed", "error"?, "cycle"?}``, ``cycle`` being the state machine's state
(its ``plan``, ``shards`` and ``apply`` results, whichever ran)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from functools import cache
from typing import Any, Literal

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from osprey_control.registry.lease import CycleLease
from osprey_control.telemetry import cycle_metrics, summarise_cycle
from osprey_handlers._settings import HandlerSettings
from osprey_handlers._telemetry import publish

__all__ = ["FinishEvent", "FinishSettings", "handler"]

logger = Logger(service="osprey-finish")
_LOGGED_JOBS = 50


class FinishSettings(HandlerSettings):
    """The function's environment (set by the CDK construct): the shared settings only."""


class FinishEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    owner: str = Field(min_length=1)
    started_at: datetime = Field(alias="startedAt")
    outcome: Literal["succeeded", "failed"]
    error: Any = None
    cycle: dict[str, Any] | None = None


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
    summary = summarise_cycle(finish.outcome, finish.cycle)
    if finish.outcome == "failed":
        logger.error("cycle failed", extra={"owner": finish.owner, "error": finish.error})
    if summary.failed_shards:
        # The shards' error names are in the state (one line here); their causes are in the derive function's
        # logs and the execution's TaskFailed events (a cause per shard could pass the payload limit).
        errors = [
            {"shard": shard.get("shard"), "error": shard.get("error")}
            for shard in (finish.cycle or {}).get("shards") or []
            if isinstance(shard, dict) and shard.get("failed")
        ]
        logger.error(
            "cycle had failed shards",
            extra={"owner": finish.owner, "failedShards": list(summary.failed_shards), "errors": errors},
        )
    if summary.jobs_failed:
        logger.warning(
            "cycle had failed jobs",
            # A bounded sample: the line stays small with a fleet-wide failure; `osprey jobs` lists them all.
            extra={
                "owner": finish.owner,
                "count": summary.jobs_failed,
                "failedJobs": list(summary.failed_jobs[:_LOGGED_JOBS]),
            },
        )
    publish(cycle_metrics(summary, duration_ms), settings.metrics_namespace)
    return {
        "outcome": finish.outcome,
        "durationMs": round(duration_ms, 1),
        "released": released,
        "failedShards": len(summary.failed_shards),
        "failedJobs": summary.jobs_failed,
    }
