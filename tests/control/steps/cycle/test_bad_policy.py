"""Given one stored policy parameter that is malformed (4 KB of ``[``), oversized or invalid, when the cycle's
collect and derive Lambdas and the ingest Lambda (with gangs) run through the real handlers, then none of them
fails: the other policies' jobs are derived as usual, the broken policy is named in each step's output, logs
and metrics, and its jobs are held (or derived under the policy's last good version)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from osprey_control.contract import parse_block
from osprey_control.policy_store import PolicySource
from osprey_control.registry import Backend, JobKey, JobStatus, NodeKind, NodeRef
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from osprey_control.steps.derive import derive_within
from osprey_handlers import collect as collect_handler
from osprey_handlers import derive as derive_handler
from tests.control.ingest.conftest import BATCH, ingest_context, load_event, sqs_batch
from tests.control.steps.cycle.conftest import NOW, gpu_metrics, register
from tests.lambda_context import lambda_context

BROKEN = "[" * 4096  # a Standard parameter's full 4 KB
GANGS = "arn:aws:states:us-east-1:123456789012:stateMachine:osprey-gang"


def register_under(registry: JobRegistry, job_id: str, policy: str) -> JobKey:
    observation = JobObservation(
        backend=Backend.BATCH,
        native_id=job_id,
        name=job_id,
        block=parse_block({"priority_derivation_profile": policy}),
        status=JobStatus.RUNNING,
        event_time=NOW - timedelta(minutes=10),
        submitted_at=NOW - timedelta(minutes=20),
        nodes=(NodeRef(node_id=f"i-0{job_id}", kind=NodeKind.INSTANCE, instance_id=f"i-0{job_id}"),),
    )
    registry.apply_observation(observation)
    return observation.key


@pytest.fixture
def broken(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A deployment whose ``broken-policy`` parameter holds 4 KB of ``[``, one job under it and one under
    training-policy, and the handlers' caches cleared."""
    aws["ssm"].put_parameter(Name="/osprey/policies/broken-policy", Value=BROKEN, Type="String")
    monkeypatch.setenv("OSPREY_TABLE_NAME", "osprey-jobs")
    monkeypatch.setenv("OSPREY_REGISTRY_SHARDS", "1")
    for module in (derive_handler, collect_handler):
        module._settings.cache_clear()
        module._components.cache_clear()
    register(aws["registry"], "good-job", "i-0good")
    register_under(aws["registry"], "held-job", "broken-policy")
    return aws


def _emf(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if '"_aws"' in line]


def test_collect_and_derive_survive_a_recursive_parameter(
    broken: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # When the collect and derive Lambdas run for the cycle
    collected = collect_handler.handler({"shards": [0], "token": 1}, lambda_context("osprey-collect"))
    derived = derive_handler.handler({"shard": 0}, lambda_context("osprey-derive"))
    # Then both succeed and the good policy's job is derived
    assert collected["jobs"] == 2
    good = broken["registry"].get(JobKey(Backend.BATCH, "good-job"))
    assert good is not None
    assert good.derived_priority is not None
    assert good.last_decision is not None
    # And the broken policy is named in the cycle's collect output, with why, and counted by each shard
    assert list(collected["invalidPolicies"]) == ["broken-policy"]
    assert "nesting deeper than 32 levels" in collected["invalidPolicies"]["broken-policy"]
    assert collected["invalidPolicyCount"] == derived["invalidPolicyCount"] == 1
    # And its job is not derived, failing as invalid-policy, not as an unknown one
    assert derived["failures"] == [
        {"key": "batch#held-job", "kind": "invalid-policy", "error": derived["failures"][0]["error"]}
    ]
    assert "broken-policy" in derived["failures"][0]["error"]
    held = broken["registry"].get(JobKey(Backend.BATCH, "held-job"))
    assert held is not None
    assert held.derived_priority is None
    # And each step publishes InvalidPolicies for it
    emf = _emf(capsys.readouterr().out)
    by_policy = [r for r in emf if r.get("InvalidPolicies") and r.get("Policy") == "broken-policy"]
    assert len(by_policy) == 2


def test_ingest_with_gangs_survives_a_recursive_parameter(
    broken: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the ingest Lambda with gangs deployed (it reads policies for every new job)
    monkeypatch.setenv("OSPREY_GANG_STATE_MACHINE_ARN", GANGS)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    from osprey_handlers import ingest  # noqa: PLC0415 - import after the environment is set

    ingest.ingestor.cache_clear()
    ingest.settings.cache_clear()
    event = load_event(BATCH)
    event["detail"]["jobId"] = "new-job"
    event["detail"]["status"] = "RUNNABLE"
    event["detail"]["tags"]["osprey:policy"] = "broken-policy"
    try:
        # When an event of a job under the broken policy arrives
        response = ingest.handler(sqs_batch(json.dumps(event)), ingest_context())
    finally:
        ingest.ingestor.cache_clear()
        ingest.settings.cache_clear()
    # Then it is recorded, not sent back for redelivery (and so never to the dead-letter queue)
    assert response == {"batchItemFailures": []}
    assert broken["registry"].get(JobKey(Backend.BATCH, "new-job")) is not None


def test_a_broken_update_keeps_deriving_under_the_last_good_version(aws: dict[str, Any]) -> None:
    # Given a busy training-policy job, and training-policy's parameter then overwritten with 4 KB of "["
    register(aws["registry"], "busy-job", "i-0busy")
    gpu_metrics(aws["cloudwatch"], "i-0busy", gpu=97.0, memory_bw=80.0)
    aws["ssm"].put_parameter(
        Name="/osprey/policies/training-policy", Value=BROKEN, Type="String", Overwrite=True
    )
    # When a shard is derived
    run = derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    )
    # Then the job is derived as before the edit (version 1), without a failure
    assert run.report.failures == []
    record = aws["registry"].get(JobKey(Backend.BATCH, "busy-job"))
    assert record is not None
    assert record.derived_priority == 60
    # And the run says the policy is invalid and which version its jobs are derived under
    assert run.to_dict()["invalidPolicyCount"] == 1
    assert "derived under its last good version (1)" in str(run.invalid_policies["training-policy"])
