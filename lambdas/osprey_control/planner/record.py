"""The per-job plan record: what a plan Lambda writes and ``osprey.adjust_parallelism()`` reads.

Format (JSON object, version "1"; docs/planner.md):

    {"version": "1", "job_id": "...", "plan_id": "<16 hex digits>", "created_at": "2025-01-01T00:00:00Z",
     "tp": 4, "pp": 4, "dp": 8, "micro_batch": 1, "virtual": 1,
     "step_time_s": 12.3, "expected_saving_fraction": 0.21, "reason": "switch"}

``plan_id`` is a digest of the job and the five degrees, so the same plan written twice has the same id
and a job re-shapes only when the id changes. Pure Python, no AWS import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from osprey_control.planner.plan import Evaluation, Plan

__all__ = ["RECORD_VERSION", "PlanRecordError", "plan_from_record", "plan_id", "plan_record"]

RECORD_VERSION = "1"
_DEGREES = ("tp", "pp", "dp", "micro_batch", "virtual")


class PlanRecordError(ValueError):
    """A plan record that does not follow the format; the message names the field."""


def plan_id(job_id: str, plan: Plan) -> str:
    text = job_id + "|" + ",".join(str(value) for value in plan.key())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan_record(
    job_id: str,
    evaluation: Evaluation,
    *,
    reason: str = "switch",
    expected_saving_fraction: float = 0.0,
    created_at: datetime | None = None,
) -> dict[str, Any]:
    """The record for ``evaluation``'s plan (JSON-ready; a DynamoDB adapter maps it to attributes)."""
    if not job_id:
        raise PlanRecordError("job_id: must be a non-empty string")
    moment = (created_at or datetime.now(UTC)).astimezone(UTC)
    plan = evaluation.plan
    return {
        "version": RECORD_VERSION,
        "job_id": job_id,
        "plan_id": plan_id(job_id, plan),
        "created_at": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        **plan.to_dict(),
        "step_time_s": evaluation.step_time_s,
        "expected_saving_fraction": expected_saving_fraction,
        "reason": reason,
    }


def plan_from_record(record: Mapping[str, Any]) -> Plan:
    """The plan in a record, checked field by field (positive integers, tp*pp*dp consistent with itself)."""
    if not isinstance(record, Mapping):
        raise PlanRecordError("(record): must be a JSON object")
    version = record.get("version")
    if version != RECORD_VERSION:
        raise PlanRecordError(f"version: expected {RECORD_VERSION!r}, got {version!r}")
    values = []
    for name in _DEGREES:
        value = record.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise PlanRecordError(f"{name}: must be a positive integer, got {value!r}")
        values.append(value)
    tp, pp, dp, micro_batch, virtual = values
    return Plan(tp=tp, pp=pp, dp=dp, micro_batch=micro_batch, virtual=virtual)
