"""The finish step, the cycle's last on every path: release the lease, summarise the cycle, say what failed.

Input ``{"owner", "startedAt" (ISO 8601), "outcome": "succeeded"|"failed", "error"?, "cycle"?}``, ``cycle``
being the state machine's state (its ``plan``, ``shards`` and ``apply`` results, whichever ran). The points it
returns (CycleDurationMs, the outcome, FailedShards, FailedJobs: :func:`osprey_control.telemetry.cycle_metrics`)
are published by the handler.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from osprey_control.telemetry import MetricPoint, cycle_metrics, summarise_cycle

__all__ = ["FinishEvent", "FinishReport", "LeaseRelease", "finish_cycle"]

logger = logging.getLogger(__name__)

# A bounded sample: the log line stays small with a fleet-wide failure; `osprey jobs` lists them all.
_LOGGED_JOBS = 50


class FinishEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    owner: str = Field(min_length=1)
    started_at: datetime = Field(alias="startedAt")
    outcome: Literal["succeeded", "failed"]
    error: Any = None
    cycle: dict[str, Any] | None = None


class LeaseRelease(Protocol):
    """The cycle lease as this step uses it (:class:`osprey_control.registry.lease.CycleLease`)."""

    def release(self, owner: str) -> bool: ...


@dataclass(frozen=True)
class FinishReport:
    answer: dict[str, Any]  # the state machine's view
    metrics: list[MetricPoint]


def finish_cycle(lease: LeaseRelease, finish: FinishEvent, now: datetime | None = None) -> FinishReport:
    """Release ``finish.owner``'s lease and report how the cycle went."""
    now = now or datetime.now(UTC)
    started = finish.started_at if finish.started_at.tzinfo else finish.started_at.replace(tzinfo=UTC)
    duration_ms = max(0.0, (now - started).total_seconds() * 1000)
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
            extra={
                "owner": finish.owner,
                "count": summary.jobs_failed,
                "failedJobs": list(summary.failed_jobs[:_LOGGED_JOBS]),
            },
        )
    answer = {
        "outcome": finish.outcome,
        "durationMs": round(duration_ms, 1),
        "released": released,
        "failedShards": len(summary.failed_shards),
        "failedJobs": summary.jobs_failed,
    }
    return FinishReport(answer, cycle_metrics(summary, duration_ms))
