"""The per-job plan record: what a plan Lambda writes and ``osprey.adjust_parallelism()`` reads.

Format (JSON object, version "1"; docs/planner.md):

    {"version": "1", "job_id": "...", "plan_id": "<16 hex digits>", "created_at": "2025-01-01T00:00:00Z",
     "tp": 4, "pp": 4, "dp": 8, "micro_batch": 1, "virtual": 1,
     "step_time_s": 12.3, "expected_saving_fraction": 0.21, "reason": "switch",
     "options": {"recompute": "selective", "sequence_parallel": true, "distributed_optimizer": true,
                 "precision": "bf16"},
     "stage_nodes": null}

``options`` are the model options the plan was scored with (the search chooses them, issue #18) and
``stage_nodes`` the node order per pipeline stage when nodes differ in speed (null otherwise); both are
advice the job applies when it re-shapes.

``plan_id`` is a digest of the job, the five degrees and (only when it is not Megatron's rank order) the node
order, so the same plan written twice has the same id, and the same degrees with a straggler moved off the
critical stage are a new recommendation. Pure Python, no AWS import.

Where it is stored: the job registry table (``OSPREY_TABLE_NAME``), in the job's partition
``pk = JOB#<backend>#<native id>`` under ``sk = PLAN``, the record as a JSON string in the attribute ``plan``
(like ``last_decision``: no Decimal round trips), plus ``plan_id`` and ``created_at`` as plain strings for
conditional writes. One item per job, overwritten by each new recommendation; ``record_item`` builds it and
``record_from_item`` reads it back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from osprey_control.planner.order import plan_key, stage_nodes_of
from osprey_control.planner.plan import Evaluation, Plan
from osprey_control.planner.replan import ReplanDecision
from osprey_control.registry import PLAN_PREFIX, PLAN_SK, is_job_pk, item_pk

__all__ = [
    "CURRENT_PLAN_FINE",
    "PlanRecordError",
    "plan_from_record",
    "plan_id",
    "plan_record",
    "record_for_decision",
    "record_from_item",
    "record_item",
    "withdrawal_for",
]

RECORD_VERSION = "1"
_DEGREES = ("tp", "pp", "dp", "micro_batch", "virtual")
PLAN_ATTRIBUTE = "plan"


class PlanRecordError(ValueError):
    """A plan record that does not follow the format; the message names the field."""


def plan_id(job_id: str, plan: Plan, stage_nodes: Sequence[Sequence[int]] = ()) -> str:
    """Digest of the job, the degrees and, when the nodes are not in rank order, their order: the same
    degrees placed differently are another recommendation (a placement-only switch)."""
    return hashlib.sha256(f"{job_id}|{plan_key(plan, stage_nodes)}".encode()).hexdigest()[:16]


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
        "plan_id": plan_id(job_id, plan, evaluation.stage_nodes),
        "created_at": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        **plan.to_dict(),
        "step_time_s": evaluation.step_time_s,
        "expected_saving_fraction": expected_saving_fraction,
        "reason": reason,
        "options": evaluation.options(),
        "stage_nodes": [list(stage) for stage in evaluation.stage_nodes] or None,
    }


def record_for_decision(
    job_id: str, decision: ReplanDecision, *, created_at: datetime | None = None
) -> dict[str, Any] | None:
    """The record a plan step writes for one job's :func:`replan` decision: the proposed plan when the
    decision is to switch, else None (nothing to write; the job keeps its current record)."""
    if not decision.switch or decision.proposed is None:
        return None
    return plan_record(
        job_id,
        decision.proposed,
        reason=decision.reason,
        expected_saving_fraction=decision.expected_saving_fraction,
        created_at=created_at,
    )


# Decisions after which the job's current plan is as good as any (within the thresholds): a record that
# still recommends something else is stale.
CURRENT_PLAN_FINE = frozenset({"no-better-plan", "below-hysteresis"})


def withdrawal_for(
    job_id: str,
    decision: ReplanDecision,
    record: Mapping[str, Any],
    *,
    running_key: str,
    last_progress_at: str,
    created_at: datetime | None = None,
) -> dict[str, Any] | None:
    """The record that withdraws a stale recommendation, or None.

    Stale: the plan step no longer makes it (``decision`` says the job's current plan is fine), it differs
    from what the job runs (``running_key``, :func:`~osprey_control.planner.order.plan_key`), and the job has
    not reported progress since it was written (its ``created_at`` is after ``last_progress_at``, the
    request's ``updated_at``), so it has not read it yet: a job reads its record only at a decision point,
    where it also reports. A job that may already be re-shaping to the recommendation keeps it (it reports
    the new plan at its next decision point, and the plan step judges that plan from there). Without this, a
    job that reads the record after conditions recovered adopts it and is switched back later.

    The withdrawal is a record of the current plan (in the order the job runs it), reason ``withdrawn``: the
    job's ``adjust_parallelism`` sees its own plan and answers ``unchanged``."""
    if decision.reason not in CURRENT_PLAN_FINE:
        return None
    try:
        recommended = plan_from_record(record)
    except PlanRecordError:
        return None
    if plan_key(recommended, stage_nodes_of(record.get("stage_nodes"))) == running_key:
        return None
    if not str(record.get("created_at", "")) > last_progress_at:
        return None
    return plan_record(job_id, decision.current, reason="withdrawn", created_at=created_at)


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


def record_item(pk: str, record: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The registry item (DynamoDB attribute values) holding ``record`` for the job partition ``pk``."""
    if not is_job_pk(pk):
        raise PlanRecordError(f"pk: must be a job partition key JOB#<backend>#<native id>, got {pk!r}")
    plan_from_record(record)
    return {
        "pk": {"S": item_pk(PLAN_PREFIX, pk)},
        "sk": {"S": PLAN_SK},
        PLAN_ATTRIBUTE: {"S": json.dumps(dict(record), sort_keys=True)},
        "plan_id": {"S": str(record.get("plan_id", ""))},
        "created_at": {"S": str(record.get("created_at", ""))},
    }


def record_from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """The record in a registry item (GetItem's ``Item``); raises PlanRecordError naming what is wrong."""
    attribute = item.get(PLAN_ATTRIBUTE)
    text = attribute.get("S") if isinstance(attribute, Mapping) else None
    if not isinstance(text, str):
        raise PlanRecordError(f"{PLAN_ATTRIBUTE}: the item has no string attribute {PLAN_ATTRIBUTE!r}")
    try:
        record = json.loads(text)
    except ValueError as error:
        raise PlanRecordError(f"{PLAN_ATTRIBUTE}: not valid JSON ({error})") from None
    if not isinstance(record, dict):
        raise PlanRecordError(f"{PLAN_ATTRIBUTE}: must be a JSON object")
    plan_from_record(record)
    return record
