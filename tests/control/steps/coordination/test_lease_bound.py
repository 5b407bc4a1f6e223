"""Issue 28 item 1: every step's deadline ends at the lease's expiry, and no backend write starts unless its
bound (every botocore attempt, with timeouts and backoff) ends before it."""

from __future__ import annotations

from datetime import timedelta

import boto3
import pytest
from botocore.config import Config

from osprey_control.aws import (
    RETRY_CONFIG,
    WRITE_RETRY_CONFIG,
    call_bound_ms,
    config_bound_ms,
    retried_bound_ms,
)
from osprey_control.backends.batch import BatchShareApplier
from osprey_control.backends.batch.distribution import FIRST_BACKOFF_S, UPDATE_ATTEMPTS
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.fence import Fence
from osprey_control.registry.lease import CycleLease
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.deadline import Deadline
from tests.control.steps.coordination.conftest import T0, TABLE
from tests.control.steps.coordination.test_fence import FakeBatch, pending_job

EPOCH = 1_800_000_000.0


def test_given_a_lease_ending_before_the_lambda_then_the_deadline_is_the_leases() -> None:
    # Given a Lambda with 120 s left whose lease expires in 45 s
    clock = [EPOCH]
    deadline = Deadline.for_invocation(lambda: 120_000.0, lease_expires_at=EPOCH + 45, clock=lambda: clock[0])

    # Then the time left is the lease's, and the margin is taken from it (10 % of 45 s is under the 10 s floor)
    assert deadline.remaining_ms() == pytest.approx(45_000)
    assert deadline.margin_ms == 10_000
    assert deadline.allows(34_000)
    assert not deadline.allows(36_000)

    # When 40 s pass, the lease has 5 s left: no work starts
    clock[0] += 40
    assert deadline.expired

    # And a Lambda ending before the lease bounds it as before
    sooner = Deadline.for_invocation(lambda: 20_000.0, lease_expires_at=EPOCH + 300, clock=lambda: EPOCH)
    assert sooner.remaining_ms() == 20_000


def test_the_bound_of_one_call_is_every_attempt_with_its_timeouts_and_backoff() -> None:
    # Given the backend writers' config: 3 attempts of 2 s connect + 5 s read, backoff 1 s and 2 s
    writer = boto3.client("batch", region_name="us-east-1", config=Config(**WRITE_RETRY_CONFIG))

    # Then one call is bounded by 24 s, read from the client's own config
    assert call_bound_ms(writer) == 24_000
    assert call_bound_ms() == 24_000
    # ... the general clients' (5 attempts of 25 s, backoff 1+2+4+8 s) by 140 s, and a client with botocore's
    # defaults (60 s timeouts) by more than a whole 300 s lease: it would never be allowed a write
    assert call_bound_ms(config=RETRY_CONFIG) == 140_000
    assert call_bound_ms(boto3.client("batch", region_name="us-east-1")) > 300_000
    assert config_bound_ms(attempts=1, connect_timeout=2, read_timeout=5) == 7_000
    # ... and Batch's UpdateSchedulingPolicy, retried by its own loop, by 4 calls and 0.25 + 0.5 + 1 s
    batch = BatchShareApplier(writer)
    assert batch.write_bound_ms == retried_bound_ms(24_000, UPDATE_ATTEMPTS, FIRST_BACKOFF_S) == 97_750


def lease_deadline(left_s: float) -> Deadline:
    return Deadline.for_invocation(lambda: 900_000.0, lease_expires_at=EPOCH + left_s, clock=lambda: EPOCH)


@pytest.mark.parametrize(("lease_left_s", "written"), [(100.0, False), (150.0, True)])
def test_a_batch_policy_update_starts_only_if_its_bound_ends_before_the_lease(
    registry: JobRegistry, lease: CycleLease, lease_left_s: float, written: bool
) -> None:
    # Given a pending Batch job and an apply step holding the lease, which expires in 100 s (less than the
    # update's 97.75 s bound plus the 10 s margin) or in 150 s (more)
    key = pending_job(registry, "train")
    holder = lease.acquire("cycle", ttl_seconds=300, now=T0)
    assert holder.token is not None
    fence = Fence(TABLE, holder.token, registry.client)
    batch = FakeBatch()

    # When it applies
    report = apply_cycle(
        [{"shard": None}],
        registry,
        [BatchShareApplier(batch)],
        now=T0 + timedelta(seconds=1),
        deadline=lease_deadline(lease_left_s),
        fence=fence,
    )

    # Then the update is made only when it can end before the lease; otherwise the job waits, still pending,
    # and the step did not lose its fence
    assert ("UpdateSchedulingPolicy" in batch.calls) is written
    assert not report.fence_lost
    record = registry.get(key)
    assert record is not None
    if written:
        assert [result.job for result in report.applied] == [key]
        assert record.applied_priority == 60
    else:
        assert report.deferred == [key]
        assert record.apply_pending()
