"""What the cycle state machine hands the apply step, typed: the Map's shard reports and the lease token.

Only what apply reads is modelled (a report's ``shard`` and whether its derive ``failed``); the reports' counts
are for the state and Finish, and are ignored here. A report the derive step did not write (a wrong type, a
negative shard) fails validation with the field's path instead of being read as "every shard".
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

__all__ = ["ApplyRequest", "ShardOutcome"]


class ShardOutcome(BaseModel):
    """One item of the shard Map's output: a derive report, or ``{"shard": N, "failed": true, ...}``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    shard: StrictInt | None = Field(default=None, ge=0, le=999)  # None: a report for the whole registry
    failed: StrictBool = False

    def as_report(self) -> dict[str, Any]:
        return {"shard": self.shard, "failed": self.failed}


class ApplyRequest(BaseModel):
    """The apply task's payload (``infra/osprey_infra/cycle_state_machine.py``, ApplyPriorities)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    shards: list[ShardOutcome] = Field(default_factory=list, max_length=1000)
    token: StrictInt | None = None  # the lease's fencing token; None: an unfenced (local, manual) run

    def reports(self) -> list[dict[str, Any]]:
        return [outcome.as_report() for outcome in self.shards]
