"""Issue 28, item 2: the Batch applier changes only the share entries it owns, through the real apply step
(moto's Batch and DynamoDB, the driver's applier with the registry's ledger and listing, the lease's fence).

Owned means both: the identifier is in Osprey's namespace (``osprey-``: a team share from
``osprey.batch.team_share`` or a job's own from ``osprey.batch.own_share``), so no job that did not opt in is
submitted with it by accident; and this deployment's share ledger recorded the entry when Osprey created it.
Everything else is refused with the reason ``osprey explain`` shows, and nothing of it is written.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.backends import Outcome
from osprey_control.backends.batch import BatchShareApplier, own_share_identifier
from osprey_control.registry import ShareEntry
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.items import record_to_item
from osprey_control.registry.shares import ShareLedger
from osprey_control.steps.apply import apply_cycle
from tests.control.backends.batch.test_team_share_applier import TABLE, World, world

__all__ = ["world"]  # the fixture, imported so pytest finds it here

runner = CliRunner()


def _set_entries(world: World, entries: dict[str, float]) -> None:
    """A human's edit of the policy (the console, another tool): ``entries`` added or set; not one of Osprey's
    updates, so it is not in ``world.updates``."""
    [policy] = world.batch.describe_scheduling_policies(arns=[world.policy])["schedulingPolicies"]
    fairshare = policy["fairsharePolicy"]
    distribution = {e["shareIdentifier"]: e for e in fairshare["shareDistribution"]}
    for share, weight in entries.items():
        distribution[share] = {"shareIdentifier": share, "weightFactor": weight}
    fairshare["shareDistribution"] = list(distribution.values())
    world.batch.update_scheduling_policy(arn=world.policy, fairsharePolicy=fairshare)
    world.updates.clear()


def _touched(world: World, share: str) -> list[Any]:
    """The weight ``share`` had in each UpdateSchedulingPolicy Osprey sent (None: absent)."""
    sent = []
    for update in world.updates:
        entries = {
            e["shareIdentifier"]: e.get("weightFactor")
            for e in update["fairsharePolicy"]["shareDistribution"]
        }
        sent.append(entries.get(share))
    return sent


def _refusal(world: World, job: Any) -> str:
    record = world.registry.get(job.key)
    assert record is not None
    assert record.apply_failure is not None, "the refusal must be recorded where osprey explain reads it"
    assert record.applied_priority != record.derived_priority
    return record.apply_failure.reason


def test_a_job_under_a_teams_existing_entry_never_sets_the_teams_weight(world: World) -> None:
    # Given the policy already holding team-b's entry at Batch's default weight 1.0, and an opted-in job submitted
    # under team-b whose new priority (100) maps to exactly that weight
    _set_entries(world, {"team-b": 1.0})
    job = world.job("b1", "team-b", 8, applied=50, derived=100)
    # When the apply step runs, and again after the priority moved
    report = world.cycle()
    # Then the job is refused with the reason (not "applied: already set", which claimed the team's entry)
    assert report.by_job()[job.key].outcome is Outcome.SKIPPED
    assert "team-b" in _refusal(world, job)
    stored = world.registry.get(job.key)
    assert stored is not None
    world.store(stored.model_copy(update={"derived_priority": 10}))
    world.cycle()
    # And team-b's entry was never written nor recorded as Osprey's
    assert world.shares()["team-b"] == 1.0
    assert all(weight in (None, 1.0) for weight in _touched(world, "team-b"))
    assert world.ledger.entries() == []


def test_a_job_under_a_teams_identifier_without_an_entry_does_not_create_one(world: World) -> None:
    # Given team-c's jobs, which did not opt in, submitted under team-c (no entry: Batch weighs them 1.0), and one
    # opted-in job under the same identifier
    for name in ("c-other-1", "c-other-2"):
        world.batch.submit_job(
            jobName=name, jobQueue=world.queue, jobDefinition="train", shareIdentifier="team-c"
        )
    job = world.job("c1", "team-c", 8, applied=50, derived=5)
    decision = {"previous": 50, "priority": 5, "base": 5.0, "target": 5.0, "reason": "derived", "rules": []}
    world.store(job.model_copy(update={"last_decision": decision}))
    # When the apply step runs
    report = world.cycle()
    # Then no team-c entry is created (it would weigh every team-c job by this one job's priority)
    assert "team-c" not in world.shares()
    assert world.updates == [] or all(weight is None for weight in _touched(world, "team-c"))
    # And the job is refused, saying why and what to submit with instead
    assert report.by_job()[job.key].outcome is Outcome.SKIPPED
    reason = _refusal(world, job)
    assert "team-c" in reason
    assert "osprey.batch.own_share" in reason
    assert "osprey.batch.team_share" in reason
    # And osprey explain and osprey jobs say so
    explained = runner.invoke(app, ["explain", "c1", "--table", TABLE])
    assert explained.exit_code == 0, explained.output
    assert "share identifier team-c is not one of Osprey's" in " ".join(explained.stdout.split())
    rows = json.loads(runner.invoke(app, ["jobs", "--json", "--table", TABLE]).stdout)
    [row] = [row for row in rows if row["name"] == "c1"]
    assert "team-c is not one of Osprey's" in row["apply_error"]


def test_an_osprey_looking_entry_a_human_recreated_after_osprey_pruned_it_is_not_changed(
    world: World,
) -> None:
    # Given Osprey's team share osprey-nlp-g2, written for a job and pruned once that job finished
    first = world.job("n1", "osprey-nlp-g2", 64, ran_hours=0.5, applied=60, derived=30)
    world.cycle()
    assert "osprey-nlp-g2" in world.shares()
    world.finish(first)
    world.cycle()
    assert "osprey-nlp-g2" not in world.shares()
    # And then a human creating an entry of that name, and a new nlp job submitted with it
    _set_entries(world, {"osprey-nlp-g2": 5.0})
    second = world.job("n2", "osprey-nlp-g2", 64, applied=60, derived=20)
    # When the same (warm) applier runs the next cycle
    report = world.cycle()
    # Then the human's entry keeps its weight, and the job is refused: Osprey did not create this entry
    assert world.shares()["osprey-nlp-g2"] == 5.0
    assert report.by_job()[second.key].outcome is Outcome.SKIPPED
    assert "Osprey did not create" in _refusal(world, second)


def test_an_entry_created_by_another_osprey_deployment_is_not_changed(world: World) -> None:
    # Given deployment A (the world's table) owning the team share osprey-vision-g1 of the shared queue
    world.job("v8", "osprey-vision-g1", 8, ran_hours=2, applied=50, derived=70)
    world.cycle()
    weight = world.shares()["osprey-vision-g1"]
    # And deployment B, with a registry and a ledger of its own, managing a job in the same share
    other = JobRegistry("osprey-other", world.dynamodb, shards=4)
    other.create_table()
    ledger = ShareLedger("osprey-other", world.dynamodb)
    applier = BatchShareApplier(
        world.batch, ledger, other.list_active, clock=world.now.timestamp, sleep=lambda _: None
    )
    job = world.job("vb", "osprey-vision-g1", 8, applied=50, derived=10)
    world.dynamodb.put_item(TableName="osprey-other", Item=record_to_item(job, shards=4))
    world.updates.clear()
    # When B's apply step runs
    report = apply_cycle([{"shard": None}], other, [applier], now=world.now)
    # Then B writes nothing to A's entry and records nothing as its own; its job is refused with the reason
    assert world.updates == []
    assert world.shares()["osprey-vision-g1"] == weight
    assert ledger.entries() == []
    assert report.by_job()[job.key].outcome is Outcome.SKIPPED
    stored = other.get(job.key)
    assert stored is not None
    assert stored.apply_failure is not None
    assert "Osprey did not create" in stored.apply_failure.reason


def test_a_legacy_entry_osprey_created_for_a_teams_identifier_is_taken_out(world: World) -> None:
    # Given an entry an earlier Osprey created (its ledger says so) for team-d's identifier, weighing every team-d
    # job by one job's priority, that job still running
    job = world.job("d1", "team-d", 8, ran_hours=1, applied=50)
    _set_entries(world, {"team-d": 42.0})
    world.ledger.add([ShareEntry(world.policy, "team-d", job.key)])
    # When the next cycle's housekeeping runs
    report = world.cycle()
    # Then the entry is removed (team-d is weighed 1.0 again, as before Osprey) and forgotten
    assert "team-d" not in world.shares()
    assert world.ledger.entries() == []
    assert report.pruned == 1
    # And the teams' own entries are untouched
    assert world.shares()["vision"] == 2.0
    assert world.shares()["analytics"] == 0.5


def test_a_second_active_job_under_a_jobs_own_share_does_not_take_it_over(world: World) -> None:
    # Given a job with a share of its own (osprey.batch.own_share), written by Osprey
    share = own_share_identifier()
    first = world.job("own-1", share, 8, ran_hours=1, applied=50, derived=80)
    world.cycle()
    weight = world.shares()[share]
    # And, a cycle later, a second job submitted with the same identifier while the first still runs
    second = world.job("own-2", share, 8, applied=50, derived=5)
    # When the apply step runs
    report = world.cycle()
    # Then the first job's weight stays, and the second is refused naming the job that holds the share
    assert world.shares()[share] == weight
    assert report.by_job()[second.key].outcome is Outcome.SKIPPED
    assert first.native_id in _refusal(world, second)
    assert {entry.job for entry in world.ledger.entries()} == {first.key}


def test_the_sdks_own_share_is_in_osprey_namespace_and_unique() -> None:
    # Given many identifiers from the SDK's helper
    shares = {own_share_identifier() for _ in range(1000)}
    # Then each is Osprey's, short enough for Batch, and no two are equal
    assert len(shares) == 1000
    assert all(share.startswith("osprey-job-") and len(share) <= 255 for share in shares)


def test_an_entry_whose_update_batch_refused_is_not_left_in_the_ledger_as_osprey_s(world: World) -> None:
    # Given Batch refusing the UpdateSchedulingPolicy that would add a job's own entry (a 400: it did not land)
    refused: list[str] = []

    def refuse(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if refused:
            return None
        refused.append("UpdateSchedulingPolicy")
        error = {"Error": {"Code": "ClientException", "Message": "refused"}}
        return AWSResponse("https://batch", 400, HTTPHeaders(), None), {
            **error,
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }

    world.batch.meta.events.register_first("before-call.batch.UpdateSchedulingPolicy", refuse)
    share = own_share_identifier()
    job = world.job("own", share, 8, applied=50, derived=80)
    report = world.cycle()
    assert report.by_job()[job.key].outcome is Outcome.FAILED
    # Then the ledger does not claim the entry that never came to be
    assert world.ledger.entries() == []
    # And when someone then creates an entry of that name, the next cycle leaves it alone
    _set_entries(world, {share: 3.0})
    stored = world.registry.get(job.key)
    assert stored is not None
    world.store(stored.model_copy(update={"derived_priority": 10, "apply_failure": None}))
    again = world.cycle()
    assert world.shares()[share] == 3.0
    assert "Osprey did not create" in again.by_job()[job.key].reason
