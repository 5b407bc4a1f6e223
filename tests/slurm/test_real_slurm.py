"""Against a real Slurm (slurmctld, 4 slurmd, slurmrestd; tests/slurm/cluster.py): Osprey discovers the jobs
that carry its marker, applies priorities through slurmrestd, and Slurm's own view (``squeue`` order,
``sprio``, which job starts) follows. Errors slurmrestd returns are classified; gangs read as ready only once
the whole allocation runs."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.backends import Outcome, PriorityChange
from osprey_control.backends.slurm import (
    SecretCredentials,
    SlurmApplier,
    SlurmClient,
    SlurmCredentials,
    SlurmGang,
    SlurmPriorityRange,
    SlurmRejectedError,
    SlurmUnavailableError,
    discover,
    marker,
    mint_token,
    parse_secret,
)
from osprey_control.contract import parse_block
from osprey_control.errors import PermanentError
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus, slurm_job_id
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.steps.apply import apply_cycle
from tests.slurm.cluster import LocalSlurm

BLOCK = parse_block({"priority_derivation_profile": "training-policy", "co_schedule": True})
MARK = f"--comment={marker(BLOCK)}"


def _wait(condition: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _record(cluster: str, job_id: int, applied: int | None = None) -> JobRecord:
    return JobRecord(
        backend=Backend.SLURM,
        native_id=f"{cluster}/{job_id}",
        name=str(job_id),
        block=BLOCK,
        status=JobStatus.PENDING,
        status_time=datetime.now(UTC),
        cluster=cluster,
        applied_priority=applied,
    )


def _fill(slurm: LocalSlurm) -> int:
    """A running job holding every node, so what is submitted next queues."""
    blocker = slurm.sbatch("-N4", "--exclusive", "-t", "5", wrap="sleep 300")
    _wait(lambda: slurm.squeue_states().get(blocker) == "RUNNING", "the blocking job to run")
    return blocker


@pytest.fixture
def registry() -> Iterator[JobRegistry]:
    with mock_aws():
        registry = JobRegistry(
            "osprey-slurm-test", boto3.client("dynamodb", region_name="us-east-1"), shards=2
        )
        registry.create_table()
        yield registry


def test_discovery_records_only_marked_jobs_with_their_nodes_gpus_and_limits(
    clean: LocalSlurm, registry: JobRegistry
) -> None:
    # Given a running marked job on two nodes, a queued marked job and an unmarked job
    running = clean.sbatch("-N2", "--exclusive", "--gres=gpu:4", "-t", "10", MARK, wrap="sleep 300")
    queued = clean.sbatch("-N4", "--exclusive", "--gres=gpu:4", "-t", "3", MARK, wrap="sleep 300")
    unmarked = clean.sbatch("-N2", "--exclusive", "-t", "5", wrap="sleep 300")
    _wait(lambda: clean.squeue_states().get(running) == "RUNNING", "the first job to run")

    # When discovery runs and its observations are merged into the registry
    found = discover(clean.client(), clean.cluster)
    for observation in found.observations:
        registry.apply_observation(observation.to_observation())

    # Then the two marked jobs are registered, the unmarked one is not
    ids = {observation.job_id for observation in found.observations}
    assert ids == {running, queued}
    assert unmarked not in ids
    assert found.unmanaged >= 1
    live = registry.get(_key(clean, running))
    assert live is not None
    assert live.status is JobStatus.RUNNING
    assert live.policy == "training-policy"
    assert live.block.co_schedule is True
    assert len(live.nodes) == 2
    assert all(node.gpus == 4 for node in live.nodes)
    assert live.requested_gpus == 8
    assert live.declared_runtime_s == 600
    waiting = registry.get(_key(clean, queued))
    assert waiting is not None
    assert waiting.status is JobStatus.PENDING
    assert waiting.nodes == ()
    assert waiting.requested_gpus == 16
    assert waiting.declared_runtime_s == 180

    # And a second pass over the unchanged cluster writes nothing
    again = discover(clean.client(), clean.cluster)
    assert not any(registry.apply_observation(o.to_observation()).changed for o in again.observations)


def test_applied_priorities_reorder_slurms_queue_and_decide_which_job_starts(clean: LocalSlurm) -> None:
    # Given every node busy and three marked jobs queued in submission order a, b, c (Slurm: FIFO)
    blocker = _fill(clean)
    a, b, c = (clean.sbatch("-N4", "--exclusive", "-t", "5", MARK, wrap="sleep 300") for _ in range(3))
    assert clean.squeue_order() == [a, b, c]

    # When Osprey applies c=90, b=50, a=10 through slurmrestd
    applier = SlurmApplier(lambda cluster: clean.client())
    report = applier.apply(
        [
            PriorityChange(_record(clean.cluster, job), priority)
            for job, priority in ((a, 10), (b, 50), (c, 90))
        ]
    )

    # Then every write landed, sprio shows the mapped priorities and squeue orders the queue by them
    assert [result.outcome for result in report.results] == [Outcome.APPLIED] * 3
    assert report.writes == 3
    assert clean.sprio() == {a: 1001, b: 5001, c: 9001}
    assert clean.squeue_order() == [c, b, a]

    # And when the nodes free up, Slurm starts c, the highest, first
    clean.run("scancel", str(blocker))
    _wait(lambda: clean.squeue_states().get(c) == "RUNNING", "job c to start")
    assert clean.squeue_states()[a] == "PENDING"
    assert clean.squeue_states()[b] == "PENDING"

    # And applying the same priority again reads it and writes nothing
    again = applier.apply([PriorityChange(_record(clean.cluster, b), 50)])
    assert again.results[0].outcome is Outcome.APPLIED
    assert again.results[0].reason == "already set"
    assert again.writes == 0


def test_the_apply_step_records_what_slurm_accepted_and_skips_what_it_must_not_touch(
    clean: LocalSlurm, registry: JobRegistry
) -> None:
    # Given a queued marked job, a queued job whose marker was removed, and a job that already finished,
    # all discovered, with derived priorities the apply step has not written yet
    done = clean.sbatch("-N1", "-t", "1", MARK, "--gres=gpu:1", wrap="sleep 1")
    _fill(clean)
    marked = clean.sbatch("-N4", "--exclusive", "-t", "5", MARK, wrap="sleep 300")
    unmarked_later = clean.sbatch("-N4", "--exclusive", "-t", "5", MARK, wrap="sleep 300")
    for observation in discover(clean.client(), clean.cluster).observations:
        registry.apply_observation(observation.to_observation())
    clean.client().update_job(unmarked_later, {"comment": "someone else's job now"})
    _wait(lambda: done not in clean.squeue_states(), "the short job to finish")
    now = datetime.now(UTC)
    for job, priority in ((marked, 80), (unmarked_later, 70), (done, 60)):
        key = _key(clean, job)
        record = registry.get(key)
        assert record is not None
        registry.record_decision(key, {"reason": "derived"}, priority, record.version, now)
    before = clean.sprio()

    # When the cycle's apply step runs with the Slurm applier
    report = apply_cycle([{"shard": None}], registry, [SlurmApplier(lambda cluster: clean.client())], now=now)

    # Then the marked job holds its priority in Slurm and in the registry
    outcomes = {str(slurm_job_id(result.job.native_id).job_id): result for result in report.results}
    assert outcomes[str(marked)].outcome is Outcome.APPLIED
    assert clean.sprio()[marked] == SlurmPriorityRange().map(80)
    stored = registry.get(_key(clean, marked))
    assert stored is not None
    assert stored.applied_priority == 80
    # And the job without the marker is skipped and left as Slurm had it
    assert outcomes[str(unmarked_later)].outcome is Outcome.SKIPPED
    assert "marker" in outcomes[str(unmarked_later)].reason
    assert clean.sprio()[unmarked_later] == before[unmarked_later]
    # (a finished job is not pending in the registry at all; asked directly, the applier skips it)
    assert str(done) not in outcomes
    ended = SlurmApplier(lambda cluster: clean.client()).apply(
        [PriorityChange(_record(clean.cluster, done), 60)]
    )
    assert ended.results[0].outcome is Outcome.SKIPPED
    assert "ended" in ended.results[0].reason
    failure = registry.get(_key(clean, unmarked_later))
    assert failure is not None
    assert failure.apply_failure is not None
    assert failure.apply_failure.permanent


def test_slurmrestd_refusals_are_classified_permanent_and_outages_transient(clean: LocalSlurm) -> None:
    # Given a queued job
    _fill(clean)
    job = clean.sbatch("-N4", "--exclusive", "-t", "5", MARK, wrap="sleep 300")
    client = clean.client()

    # When a priority of 0 is sent (HTTP 200 with errors), Then it is a permanent refusal naming Slurm's reason
    with pytest.raises(SlurmRejectedError, match="Priority must be >0") as refused:
        client.update_job(job, {"priority": 0})
    assert isinstance(refused.value, PermanentError)
    # When the job id is unknown, Then the error says the job is gone (the applier skips it)
    with pytest.raises(SlurmRejectedError) as gone:
        client.update_job(999_999, {"priority": 5})
    assert gone.value.job_gone
    # When the token is signed with the wrong key, Then slurmrestd answers 500 with no Slurm error number,
    # exactly as when slurmctld is down: transient, and the credential source is told to read its secret again
    invalidated: list[bool] = []
    forged = mint_token(b"not-the-cluster-key", "root")
    refused_token = SlurmClient(
        clean.url,
        lambda: SlurmCredentials("root", forged),
        on_unauthorized=lambda: invalidated.append(True),
        allow_insecure_http=True,
    )
    with pytest.raises(SlurmUnavailableError):
        refused_token.jobs()
    assert invalidated == [True]
    # When the secret gives no token, Then it is a credential to fix, not an outage to wait out
    with pytest.raises(SlurmRejectedError, match="no slurmrestd token") as missing:
        SlurmClient(clean.url, lambda: SlurmCredentials("root", ""), allow_insecure_http=True).jobs()
    assert missing.value.reason == "unauthorized"
    # When nothing listens, Then it is transient, and the applier reports it as worth retrying
    applier = SlurmApplier(
        lambda cluster: SlurmClient(
            "http://127.0.0.1:9", clean.credentials, timeout=2, allow_insecure_http=True
        )
    )
    result = applier.apply([PriorityChange(_record(clean.cluster, job), 40)]).results[0]
    assert result.outcome is Outcome.FAILED
    assert result.transient


def test_credentials_from_secrets_manager_work_in_both_forms(clean: LocalSlurm) -> None:
    # Given the two secret forms AWS clusters provide: scontrol token's output (ParallelCluster's cron) and
    # the signing key itself (AWS PCS)
    printed = clean.run("scontrol", "token", "username=root", "lifespan=600").strip()
    key = json.dumps({"jwt_key": base64.b64encode(clean.jwt_key).decode(), "username": "root"})
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        secrets.create_secret(Name="slurm-token", SecretString=printed)
        secrets.create_secret(Name="slurm-key", SecretString=key)
        for name in ("slurm-token", "slurm-key"):
            # When the client reads its credentials from that secret
            # (the key only with the explicit opt-in: docs/slurm.md says to store a token)
            source = SecretCredentials(name, default_user="root", allow_signing_key=True, client=secrets)
            client = SlurmClient(
                clean.url, source, on_unauthorized=source.invalidate, allow_insecure_http=True
            )
            # Then slurmrestd accepts them
            assert isinstance(client.jobs(), list), name
    assert parse_secret(printed, "root")[1] is not None  # the SLURM_JWT=... line is read as a token


def test_a_gang_is_ready_only_when_its_whole_allocation_runs(clean: LocalSlurm) -> None:
    # Given a 2-node marked job queued behind a full cluster
    blocker = _fill(clean)
    job = clean.sbatch("-N2", "--exclusive", "-t", "5", MARK, wrap="sleep 300")
    gang = SlurmGang(clean.client(), f"{clean.cluster}/{job}")
    # Then it has 0 of 2 workers up while pending
    pending = gang.readiness()
    assert (pending.ready_workers, pending.requested_workers, pending.finished) == (0, 2, False)
    # When the nodes free up, Then both workers are up at once
    clean.run("scancel", str(blocker))
    _wait(lambda: gang.readiness().ready_workers == 2, "the gang to run")
    # And the fail fallback cancels it, after which it reads as finished
    gang.stop()
    _wait(lambda: gang.readiness().finished, "the gang to end")
    # And an unmarked job is never cancelled
    other = clean.sbatch("-N1", "-t", "5", wrap="sleep 300")
    with pytest.raises(PermanentError, match="marker"):
        SlurmGang(clean.client(), f"{clean.cluster}/{other}").stop()
    assert other in clean.squeue_states()


def _key(cluster: LocalSlurm, job: int) -> JobKey:
    """The registry key of ``job``: ``<cluster>/<job id>@<submit time>`` (osprey_control.registry.identity)."""
    submitted = next(item["submit_time"] for item in cluster.client().jobs() if item["job_id"] == job)
    return JobKey(Backend.SLURM, f"{cluster.cluster}/{job}@{submitted}")
