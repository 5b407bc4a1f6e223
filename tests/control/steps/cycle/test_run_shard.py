"""Given jobs registered from their events and GPU metrics in CloudWatch, when a shard of the cycle runs,
then each job's priority is derived from its own metrics, recorded in the registry as derived (not applied),
and reported as pending for the apply step (moto DynamoDB, SSM and CloudWatch; the real registry, collector and engine)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from osprey_control.policy_store import PolicySource
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.steps.derive import derive_within
from tests.control.steps.cycle.conftest import NOW, gpu_metrics, register


def test_a_shard_derives_records_and_reports_each_jobs_priority(aws: dict[str, Any]) -> None:
    registry: JobRegistry = aws["registry"]
    busy = register(registry, "busy-job", "i-0busy")
    idle = register(registry, "idle-job", "i-0idle")
    gpu_metrics(aws["cloudwatch"], "i-0busy", gpu=97.0, memory_bw=80.0)
    gpu_metrics(aws["cloudwatch"], "i-0idle", gpu=8.0, memory_bw=3.0)

    report = derive_within(
        registry, PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    ).report

    assert report.failures == []
    assert report.evaluated == 2
    # Nothing was applied yet: each job is reported to the apply step with what its backend holds (nothing)
    changes = {change["native_id"]: (change["previous"], change["priority"]) for change in report.changes}
    assert changes == {"busy-job": (None, 60), "idle-job": (None, 40)}
    stored_busy, stored_idle = registry.get(busy), registry.get(idle)
    assert stored_busy is not None
    assert stored_idle is not None
    assert (stored_busy.derived_priority, stored_idle.derived_priority) == (60, 40)
    assert (stored_busy.applied_priority, stored_idle.applied_priority) == (None, None)
    assert stored_busy.last_decision["previous"] == 50  # type: ignore[index]
    assert stored_busy.last_decision is not None
    assert stored_busy.last_decision["rules"][0]["value"] == 97.0
    assert report.getmetricdata_calls == 1
    names = {point.name for point in report.metrics}
    assert {"DerivedPriority", "JobsEvaluated", "CollectionLatencyMs"} <= names


def test_second_cycle_continues_from_the_recorded_priority(aws: dict[str, Any]) -> None:
    registry: JobRegistry = aws["registry"]
    busy = register(registry, "busy-job", "i-0busy")
    gpu_metrics(aws["cloudwatch"], "i-0busy", gpu=97.0, memory_bw=80.0)
    policies = PolicySource(client=aws["ssm"])
    derive_within(registry, policies, None, cloudwatch=aws["cloudwatch"], now=NOW)
    second = derive_within(
        registry, policies, None, cloudwatch=aws["cloudwatch"], now=NOW + timedelta(seconds=30)
    ).report
    # Damping steps from the last derived priority even though nothing was applied in between (DESIGN §4)
    assert (second.changes[0]["previous"], second.changes[0]["priority"]) == (None, 70)
    stored = registry.get(busy)
    assert stored is not None
    assert stored.last_decision is not None
    assert (stored.last_decision["previous"], stored.derived_priority) == (60, 70)
