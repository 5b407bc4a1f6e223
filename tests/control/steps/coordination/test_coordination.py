"""The cycle lease and the shard plan, against a moto registry table."""

from __future__ import annotations

from datetime import timedelta

import pytest

from osprey_control.registry import JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.lease import CycleLease
from osprey_control.registry.shards import plan_shards
from tests.control.registry.conftest import observation
from tests.control.steps.coordination.conftest import T0, TABLE


def test_given_a_free_lease_when_a_cycle_acquires_it_then_a_second_cycle_is_refused(
    lease: CycleLease,
) -> None:
    first = lease.acquire("cycle-1", ttl_seconds=600, now=T0)
    second = lease.acquire("cycle-2", ttl_seconds=600, now=T0 + timedelta(seconds=30))
    assert first.acquired
    assert first.expires_at == int(T0.timestamp()) + 600
    assert not second.acquired
    assert second.held_by == "cycle-1"
    assert second.expires_at == first.expires_at


def test_given_a_held_lease_when_its_owner_retries_then_it_is_granted_again(lease: CycleLease) -> None:
    lease.acquire("cycle-1", ttl_seconds=600, now=T0)
    assert lease.acquire("cycle-1", ttl_seconds=600, now=T0 + timedelta(seconds=5)).acquired


def test_given_an_expired_lease_when_another_cycle_asks_then_it_takes_over(lease: CycleLease) -> None:
    lease.acquire("crashed", ttl_seconds=600, now=T0)
    takeover = lease.acquire("cycle-2", ttl_seconds=600, now=T0 + timedelta(seconds=601))
    assert takeover.acquired
    # the crashed execution's late release must not free the new owner's lease
    assert not lease.release("crashed")
    assert not lease.acquire("cycle-3", ttl_seconds=600, now=T0 + timedelta(seconds=602)).acquired


def test_given_a_released_lease_then_the_next_cycle_acquires_it(lease: CycleLease) -> None:
    lease.acquire("cycle-1", ttl_seconds=600, now=T0)
    assert lease.release("cycle-1")
    assert lease.acquire("cycle-2", ttl_seconds=600, now=T0 + timedelta(seconds=1)).acquired


def test_given_bad_arguments_then_the_error_names_them(lease: CycleLease) -> None:
    with pytest.raises(ValueError, match="owner"):
        lease.acquire("", ttl_seconds=600)
    with pytest.raises(ValueError, match="ttl_seconds"):
        lease.acquire("cycle", ttl_seconds=0)


def test_given_active_and_finished_jobs_when_planning_then_only_shards_with_active_jobs_are_listed(
    registry: JobRegistry,
) -> None:
    # Given five running jobs and one finished job
    for index in range(5):
        registry.apply_observation(observation(f"job-{index}"))
    registry.apply_observation(observation("done", JobStatus.SUCCEEDED))
    expected = sorted({registry.shard_of(registry.list_active()[i].key) for i in range(5)})
    # When the cycle is planned with a threshold above the fleet size
    plan = plan_shards(TABLE, shards=4, client=registry.client)
    # Then it counts only the active jobs, lists only busy shards, and stays inline
    assert plan.jobs == 5
    assert plan.shards == expected
    assert sum(plan.jobs_per_shard.values()) == 5


def test_given_an_empty_registry_when_planning_then_there_is_nothing_to_map(registry: JobRegistry) -> None:
    plan = plan_shards(TABLE, shards=4, client=registry.client)
    assert plan.to_dict() == {"shards": [], "jobs": 0, "jobsPerShard": {}}
