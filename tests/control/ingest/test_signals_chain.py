"""The job-level signals end to end: a job's own description (its tags with `osprey:expected-runtime`, its
SageMaker StoppingCondition and ResourceConfig) goes through ingest into the registry, the collector turns the
record into job-level metrics, and the shipped default policy derives a priority from them, all with the
production code (moto DynamoDB and CloudWatch)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
from botocore.stub import Stubber

from osprey.simulate import DEFAULT_POLICY
from osprey_control.derivation import compile_policy, derive
from osprey_control.ingest import Ingestor, Recogniser
from osprey_control.metrics import collect
from osprey_control.policy import load_policies
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.ingest.conftest import SAGEMAKER, load_event

KEY = JobKey(Backend.SAGEMAKER, "llama-pretrain-2026-03-01")


def _ingest(registry: JobRegistry, event: dict[str, Any]) -> None:
    clients = {name: boto3.client(name, region_name="us-east-1") for name in ("sagemaker", "batch", "ecs")}
    stubbers = [Stubber(client) for client in clients.values()]
    for stubber in stubbers:
        stubber.activate()  # no AWS lookup is expected: the event carries tags and description
    recogniser = Recogniser(sagemaker=clients["sagemaker"], batch=clients["batch"])
    Ingestor(registry, recogniser=recogniser, ecs=clients["ecs"]).ingest(event)
    for stubber in stubbers:
        stubber.assert_no_pending_responses()


def test_given_a_tagged_sagemaker_job_when_it_runs_then_the_default_policy_reads_its_own_signals(
    registry: JobRegistry,
) -> None:
    # Given the canned event (2 x ml.p4d.24xlarge = 16 GPUs, MaxRuntimeInSeconds 86400) with the user's
    # estimate of 2 hours as a tag
    event = load_event(SAGEMAKER)
    event["detail"]["Tags"]["osprey:expected-runtime"] = "7200"

    # When it is ingested, collected ten minutes after it started (no CloudWatch data yet) and derived
    _ingest(registry, event)
    record = registry.get(KEY)
    assert record is not None
    assert (record.declared_runtime_s, record.requested_gpus, record.block.expected_runtime) == (
        86400,
        16,
        7200,
    )
    started = record.status_time
    collected = collect(
        [record],
        client=boto3.client("cloudwatch", region_name="us-east-1"),
        now=started + timedelta(minutes=10),
    )
    values = collected.metrics[KEY].job_values
    policy = load_policies([DEFAULT_POLICY])[0]
    decision = derive(compile_policy(policy), collected.metrics[KEY], 50)

    # Then the signals are the job's own: 16 GPUs, the estimate (not the 24 h limit) less the 10 minutes held,
    # 16 GPUs x 10 minutes attained; and the engine used each of them
    assert values["requested_gpus"] == 16
    assert values["remaining_time"] == 7200 - 600
    assert abs(values["attained_service"] - 16 * 600 / 3600) < 1e-9
    used = {rule.metric for rule in decision.rules if rule.outcome == "used"}
    assert {"remaining_time", "requested_gpus", "attained_service", "queue_wait"} <= used
