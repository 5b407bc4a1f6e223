"""What the cycle's steps hand each other through the state machine, typed, and the caps that keep it small.

- derive → state: :class:`ShardReport` (``to_dict``: counts and at most :data:`FAILURE_SAMPLE` failures, never
  per-job records; the pending jobs are in the registry's ``apply-pending`` index);
- Map → apply: :class:`ApplyRequest`, the shard reports and the lease token. Only what apply reads is modelled
  (a report's ``shard`` and whether its derive ``failed``); a report the derive step did not write (a wrong
  type, a negative shard) fails validation with the field's path instead of being read as "every shard".

See docs/control-plane.md, Payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from osprey_control.errors import ERROR_CHARS, FAILURE_SAMPLE
from osprey_control.telemetry import MetricPoint

__all__ = ["ERROR_CHARS", "FAILURE_SAMPLE", "ApplyRequest", "ShardOutcome", "ShardReport"]


@dataclass
class ShardReport:
    """A shard's result. ``changes`` (the pending jobs) and ``failures`` (all of them) are for in-process
    callers (the CLI, benches, tests); the state machine gets :meth:`to_dict`, counts and a sample."""

    shard: int | None
    evaluated: int
    changes: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)
    series: int = 0
    getmetricdata_calls: int = 0
    metrics: list[MetricPoint] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The state machine's view: JSON-able and bounded in size (no per-job list), without the metric
        points (those go to EMF). ``jobs_failed`` and not ``failed``: the Map marks a failed shard with
        ``failed: true``."""
        return {
            "shard": self.shard,
            "evaluated": self.evaluated,
            "pending": len(self.changes),
            "jobs_failed": len(self.failures),
            "failures": [
                {**failure, "error": failure.get("error", "")[:ERROR_CHARS]}
                for failure in self.failures[:FAILURE_SAMPLE]
            ],
            "series": self.series,
            "getmetricdata_calls": self.getmetricdata_calls,
        }


class ShardOutcome(BaseModel):
    """One item of the shard Map's output: a derive report, or ``{"shard": N, "failed": true, ...}``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    shard: StrictInt | None = Field(default=None, ge=0, le=999)  # None: a report for the whole registry
    failed: StrictBool = False

    def as_report(self) -> dict[str, Any]:
        return {"shard": self.shard, "failed": self.failed}


class ApplyRequest(BaseModel):
    """The apply task's payload (``infra/osprey_infra/cycle_state_machine.py``, ApplyPriorities)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    shards: list[ShardOutcome] = Field(default_factory=list, max_length=1000)
    token: StrictInt | None = None  # the lease's fencing token; None: an unfenced (local, manual) run
    # The lease's expiry (epoch seconds): no step of the execution works, and no backend write runs, past it.
    expires_at: StrictInt | None = Field(default=None, alias="expiresAt")

    def reports(self) -> list[dict[str, Any]]:
        return [outcome.as_report() for outcome in self.shards]
