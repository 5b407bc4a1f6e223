"""Issue 28 item 1: the share ledger, the apply history and the plan step's writes are fenced like the job
records: once another execution took the lease, they write nothing and raise FenceLostError (moto)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from osprey_control.registry import Backend, JobKey, PlanItems, ShareEntry, ShareLedger, WriteIntents
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.fence import Fence, FenceLostError
from osprey_control.registry.history import APPLIED
from osprey_control.registry.lease import CycleLease
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.in_doubt import intent_for
from tests.control.registry.conftest import T0, TABLE

POLICY = "arn:aws:batch:us-east-1:123456789012:scheduling-policy/fair"
JOB = JobKey(Backend.BATCH, "job-1")


def fences(registry: JobRegistry) -> tuple[Fence, Fence]:
    """The fence of "stale", whose lease expired and was taken by "next", and next's."""
    lease = CycleLease(TABLE, registry.client)
    stale = lease.acquire("stale", ttl_seconds=300, now=T0)
    fresh = lease.acquire("next", ttl_seconds=300, now=T0 + timedelta(seconds=301))
    assert stale.token is not None
    assert fresh.token is not None
    return Fence(TABLE, stale.token, registry.client), Fence(TABLE, fresh.token, registry.client)


def plan_item(plan_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "PLAN"}, "plan_id": {"S": plan_id}}


def test_given_a_lost_lease_then_the_share_ledger_records_and_forgets_nothing(registry: JobRegistry) -> None:
    # Given an entry recorded by the execution holding the lease
    stale, fresh = fences(registry)
    entry = ShareEntry(POLICY, "job-1", JOB)
    holder = ShareLedger(TABLE, registry.client)
    holder.fence = fresh
    holder.add([entry])

    # When the execution that lost the lease adds or removes entries
    old = ShareLedger(TABLE, registry.client)
    old.fence = stale
    with pytest.raises(FenceLostError):
        old.add([ShareEntry(POLICY, "job-2", JobKey(Backend.BATCH, "job-2"))])
    with pytest.raises(FenceLostError):
        old.remove([entry])

    # Then the ledger is the holder's
    assert holder.entries() == [entry]


def test_given_a_lost_lease_then_no_apply_history_item_is_written(registry: JobRegistry) -> None:
    stale, fresh = fences(registry)
    history = registry.events
    with pytest.raises(FenceLostError):
        history.record_apply(JOB, priority=60, outcome=APPLIED, detail="x", now=T0, expires=0, fence=stale)
    assert history.apply_events(JOB) == []
    history.record_apply(JOB, priority=70, outcome=APPLIED, detail="y", now=T0, expires=0, fence=fresh)
    assert [event["priority"] for event in history.apply_events(JOB)] == [70]


def test_given_a_lost_lease_then_the_plan_step_writes_no_plan_record(registry: JobRegistry) -> None:
    stale, fresh = fences(registry)
    old, holder = PlanItems(TABLE, registry.client), PlanItems(TABLE, registry.client)
    old.fence, holder.fence = stale, fresh

    with pytest.raises(FenceLostError):
        old.put_record(plan_item("plan-a"))
    assert holder.record(f"JOB#{JOB}") is None

    # The holder's writes keep their own conditions: a repeat of the same plan is not rewritten
    assert holder.put_record(plan_item("plan-b"))
    assert not holder.put_record(plan_item("plan-b"))
    with pytest.raises(FenceLostError):
        old.replace_record(plan_item("plan-c"), "plan-b")
    with pytest.raises(FenceLostError):
        old.mark_planned(f"JOB#{JOB}", "2026-03-01T12:00:00Z", "switch")
    record = holder.record(f"JOB#{JOB}")
    assert record is not None
    assert record["plan_id"]["S"] == "plan-b"


def test_a_write_intent_is_recorded_and_deleted_only_under_the_lease(registry: JobRegistry) -> None:
    # Given an intent of the stale execution, recorded while it still held the lease
    lease = CycleLease(TABLE, registry.client)
    first = lease.acquire("stale", ttl_seconds=300, now=T0)
    assert first.token is not None
    stale = Fence(TABLE, first.token, registry.client)
    intents = WriteIntents(TABLE, registry.client)
    intent = intent_for(
        stale.token, 1, backends=[Backend.SAGEMAKER], keys=[JOB], deadline=Deadline.never(), now=T0
    )
    intents.record(intent, stale)

    # When another execution takes the lease, the stale one can neither delete it nor record another
    _ = lease.acquire("next", ttl_seconds=300, now=T0 + timedelta(seconds=301))
    with pytest.raises(FenceLostError):
        intents.resolve(intent, stale)
    with pytest.raises(FenceLostError):
        intents.record(
            intent_for(
                stale.token, 2, backends=[Backend.BATCH], keys=None, deadline=Deadline.never(), now=T0
            ),
            stale,
        )

    # Then the intent is there for the holder, names its job, and ends after the slack
    assert intents.open() == [intent]
    assert intent.covers(JOB, Backend.BATCH)
    assert not intent.covers(JobKey(Backend.SAGEMAKER, "other"), Backend.SAGEMAKER)
