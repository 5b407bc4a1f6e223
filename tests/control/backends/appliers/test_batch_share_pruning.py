"""Fair-share entries of finished Batch jobs are pruned (Batch allows 500 active share identifiers per queue),
and only the entries Osprey added: against moto's Batch and DynamoDB, with the registry's real share ledger."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from osprey_control.backends import Outcome, PriorityChange
from osprey_control.backends.batch import BatchShareApplier, weight_factor
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.items import record_to_item
from osprey_control.registry.model import JobRecord, JobStatus
from osprey_control.registry.shares import ShareEntry, ShareLedger
from osprey_control.steps.apply import apply_cycle
from tests.control.backends.appliers.test_batch_shares import Fleet

TABLE = "osprey-registry"


class World:
    def __init__(self) -> None:
        self.fleet = Fleet(boto3.client("batch", region_name="us-east-1"))
        self.dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        self.registry = JobRegistry(TABLE, self.dynamodb, shards=4)
        self.registry.create_table()
        self.ledger = ShareLedger(TABLE, self.dynamodb)
        self.applier = BatchShareApplier(self.fleet.client, self.ledger)

    def store(self, record: JobRecord) -> None:
        self.dynamodb.put_item(TableName=TABLE, Item=record_to_item(record, shards=4))

    def finish(self, record: JobRecord) -> None:
        self.store(record.model_copy(update={"status": JobStatus.SUCCEEDED}))


@pytest.fixture
def world() -> Iterator[World]:
    with mock_aws(config={"batch": {"use_docker": False}}):
        yield World()


def test_a_finished_jobs_share_is_pruned_and_the_teams_own_shares_stay(world: World) -> None:
    # Given two running jobs whose shares Osprey added, and the team's own shares already in the policy
    done = world.fleet.job("done", share="osprey-job-done", applied=50)
    busy = world.fleet.job("busy", share="osprey-job-busy", applied=50)
    for job in (done, busy):
        world.store(job)
    report = world.applier.apply([PriorityChange(done, 70), PriorityChange(busy, 20)])
    assert {result.outcome for result in report.results} == {Outcome.APPLIED}
    assert {entry.share for entry in world.ledger.entries()} == {"osprey-job-done", "osprey-job-busy"}

    # When one job finishes and the cycle's housekeeping runs
    world.finish(done)
    pruned = world.applier.housekeep(lambda: True)

    # Then its entry left the policy and the ledger; the running job's and the team's entries are untouched
    assert pruned.pruned == 1
    assert world.fleet.shares() == {"analytics": 0.5, "legacy*": 2.0, "osprey-job-busy": weight_factor(20)}
    assert [entry.share for entry in world.ledger.entries()] == ["osprey-job-busy"]


def test_an_entry_that_was_in_the_policy_before_osprey_is_never_pruned(world: World) -> None:
    # Given a job that reuses the team's existing "analytics" share identifier
    job = world.fleet.job("reuse", share="analytics", applied=50)
    world.store(job)
    world.applier.apply([PriorityChange(job, 90)])
    # When it finishes
    world.finish(job)
    world.applier.housekeep(lambda: True)
    # Then the team's entry stays, with its own weight: Osprey neither changed nor recorded it
    assert world.fleet.shares()["analytics"] == 0.5
    assert world.ledger.entries() == []


def test_a_job_that_left_the_registry_counts_as_finished(world: World) -> None:
    # Given an entry whose job's items have expired from the registry (never stored here)
    job = world.fleet.job("gone", share="osprey-job-gone", applied=50)
    world.applier.apply([PriorityChange(job, 40)])
    # When housekeeping runs
    report = world.applier.housekeep(lambda: True)
    # Then the entry is pruned
    assert report.pruned == 1
    assert "osprey-job-gone" not in world.fleet.shares()


def test_a_new_job_with_a_finished_jobs_identifier_claims_the_entry(world: World) -> None:
    # Given a finished job's entry, and a new job submitted with the same share identifier
    old = world.fleet.job("old", share="osprey-job-nightly", applied=50)
    world.store(old)
    world.applier.apply([PriorityChange(old, 60)])
    world.finish(old)
    new = world.fleet.job("new", share="osprey-job-nightly", applied=50)
    world.store(new)
    # When the new job is applied (same weight: the policy needs no write) and housekeeping runs after it
    world.applier.apply([PriorityChange(new, 60)])
    world.applier.housekeep(lambda: True)
    # Then the entry is the new job's and stays
    assert world.fleet.shares()["osprey-job-nightly"] == weight_factor(60)
    assert [entry.job for entry in world.ledger.entries()] == [new.key]


def test_pruning_stops_when_the_lease_is_lost(world: World) -> None:
    # Given a finished job's entry
    job = world.fleet.job("done", share="osprey-job-done", applied=50)
    world.applier.apply([PriorityChange(job, 70)])
    world.fleet.updates.clear()
    # When housekeeping runs after another execution took the lease
    report = world.applier.housekeep(lambda: False)
    # Then nothing is written and the entry is still recorded for the next holder
    assert report.fence_lost
    assert world.fleet.updates == []
    assert [entry.share for entry in world.ledger.entries()] == ["osprey-job-done"]


def test_a_failing_policy_keeps_its_entries_and_the_other_policies_are_pruned(world: World) -> None:
    # Given the ledger names a policy Batch no longer has, and a real finished entry
    job = world.fleet.job("done", share="osprey-job-done", applied=50)
    world.applier.apply([PriorityChange(job, 70)])
    missing = world.fleet.policy.replace(":scheduling-policy/fair", ":scheduling-policy/deleted")
    world.ledger.add([ShareEntry(missing, "job-x", job.key)])
    # When housekeeping runs
    report = world.applier.housekeep(lambda: True)
    # Then the real entry is pruned and the deleted policy's entry is forgotten
    assert report.pruned == 1
    assert world.ledger.entries() == []


def test_the_apply_step_runs_the_housekeeping_once_per_cycle(world: World) -> None:
    # Given a finished job's entry and no pending jobs
    job = world.fleet.job("done", share="osprey-job-done", applied=50)
    world.applier.apply([PriorityChange(job, 70)])
    # When a cycle's apply step runs
    report = apply_cycle([{"shard": None}], world.registry, [world.applier])
    # Then the entry is gone
    assert report.pruned == 1
    assert "osprey-job-done" not in world.fleet.shares()


def test_a_ledger_that_cannot_be_read_fails_the_jobs_rather_than_leak_entries(world: World) -> None:
    class Broken(ShareLedger):
        def entries(self) -> list[ShareEntry]:
            raise RuntimeError("throttled")

    job = world.fleet.job("j", share="osprey-job-j", applied=50)
    applier = BatchShareApplier(world.fleet.client, Broken(TABLE, world.dynamodb))
    report = applier.apply([PriorityChange(job, 70)])
    assert [result.outcome for result in report.results] == [Outcome.FAILED]
    assert "osprey-job-j" not in world.fleet.shares()
