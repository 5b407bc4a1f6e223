"""Given active jobs in several shards, when the cycle collects once for all of them, then GetMetricData is
called ``ceil(series / 500)`` times in all, each shard's part is stored under the lease token, and a shard's
derive uses that part instead of reading CloudWatch again (issue 14: one collection per cycle)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.derivation import JobMetrics, NodeMetrics
from osprey_control.metrics import CollectionResult
from osprey_control.metrics.snapshot import SnapshotError, decode, encode, split_by
from osprey_control.registry import Backend, JobKey, JobRecord
from osprey_control.registry.collections import MAX_BODY_BYTES, CollectionStore
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.steps.collect import collect_for_cycle
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.derive import derive_within
from tests.control.metrics.helpers import NOW, instance, record
from tests.control.steps.derive.test_shard import MemoryStore, Policies

TABLE = "osprey-collect-step"
SHARDS = 4


class Registry(MemoryStore):
    """Active jobs by shard, as the registry's active-jobs index lists them."""

    def __init__(self, records: list[JobRecord]) -> None:
        super().__init__({job.key: 0 for job in records})
        self.records = records

    def shard_of(self, key: JobKey) -> int:
        return int(key.native_id.rsplit("-", 1)[1]) % SHARDS

    def list_active(self, shard: int | None = None) -> list[JobRecord]:
        return [job for job in self.records if shard is None or self.shard_of(job.key) == shard]


class Calls:
    def __init__(self, client: Any) -> None:
        self.count = 0
        self.instances: set[str] = set()
        client.meta.events.register("before-parameter-build.cloudwatch.GetMetricData", self._seen)

    def _seen(self, params: dict[str, Any], **_: Any) -> None:
        self.count += 1
        for query in params.get("MetricDataQueries", []):
            for dimension in query.get("MetricStat", {}).get("Metric", {}).get("Dimensions", []):
                if dimension["Name"] == "InstanceId":
                    self.instances.add(dimension["Value"])


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        registry = JobRegistry(TABLE, boto3.client("dynamodb", region_name="us-east-1"), shards=SHARDS)
        registry.create_table()
        yield boto3.client("cloudwatch", region_name="us-east-1"), registry.client


def _fleet(cloudwatch: Any, jobs: int) -> list[JobRecord]:
    """``jobs`` Batch jobs on one instance each, every instance publishing its GPU utilization."""
    records = [record(Backend.BATCH, f"job-{n}", [instance(f"i-{n:017x}")]) for n in range(jobs)]
    for n in range(jobs):
        cloudwatch.put_metric_data(
            Namespace="CWAgent",
            MetricData=[
                {
                    "MetricName": "nvidia_smi_utilization_gpu",
                    "Dimensions": [{"Name": "InstanceId", "Value": f"i-{n:017x}"}],
                    "Value": 50.0 + n,
                    "Timestamp": NOW - timedelta(minutes=1),
                }
            ],
        )
    return records


def test_one_collection_serves_every_shard_with_the_fewest_calls(aws: tuple[Any, Any]) -> None:
    # Given 40 running jobs spread over four shards, each with its own instance's series
    cloudwatch, dynamodb = aws
    records = _fleet(cloudwatch, 40)
    registry = Registry(records)
    store = CollectionStore(TABLE, dynamodb)
    calls = Calls(cloudwatch)

    # When the cycle's collect step runs under lease token 7
    report = collect_for_cycle(
        registry, Policies(), store, shards=range(SHARDS), token=7, cloudwatch=cloudwatch, now=NOW
    )

    # Then it read every series with ceil(series / 500) calls in all (per shard it would be at least four)
    assert report.jobs == 40
    assert report.series >= 40
    assert calls.count == report.calls == math.ceil(report.series / 500)
    assert report.stored == SHARDS
    assert report.too_large == ()
    # And each shard's part holds exactly that shard's jobs, readable only under the same token
    for shard in range(SHARDS):
        body = store.get(shard, 7)
        assert body is not None
        part = decode(body)
        assert set(part.metrics) == {job.key for job in registry.list_active(shard)}
        assert store.get(shard, 8) is None

    # When a shard's derive runs with its part
    shard = 2
    prior = decode(store.get(shard, 7) or b"")
    before = calls.count
    run = derive_within(
        registry,
        Policies(),
        None,
        Deadline(lambda: 60_000.0, margin_ms=10_000),
        shard=shard,
        cloudwatch=cloudwatch,
        now=NOW,
        prior=prior,
    )

    # Then it reads no CloudWatch series and derives every job of its shard from the stored values
    assert calls.count == before
    assert run.report.evaluated == len(registry.list_active(shard))
    assert run.report.getmetricdata_calls == 0
    job = registry.list_active(shard)[0]
    decision, _priority = registry.written[job.key]
    used = {rule["metric"]: rule["value"] for rule in decision["rules"] if rule.get("used")}
    assert used["gpu_utilization"] == pytest.approx(50.0 + int(job.native_id.split("-")[1]))


def test_a_job_registered_after_the_collection_is_read_by_its_shard_alone(aws: tuple[Any, Any]) -> None:
    # Given a stored part for shard 1 that lacks a job registered since
    cloudwatch, _ = aws
    records = _fleet(cloudwatch, 8)
    registry = Registry(records[:4])
    parts = split_by(
        collect_for_cycle_result(registry, cloudwatch),
        {job.key: registry.shard_of(job.key) for job in records},
        [1],
    )
    registry.records = records
    registry.versions.update({job.key: 0 for job in records})
    calls = Calls(cloudwatch)

    # When shard 1 is derived with that part
    run = derive_within(
        registry,
        Policies(),
        None,
        Deadline(lambda: 60_000.0, margin_ms=10_000),
        shard=1,
        cloudwatch=cloudwatch,
        now=NOW,
        prior=parts[1],
    )

    # Then only the new jobs' series are read, in one call, and every job of the shard is derived
    new = [job for job in records[4:] if registry.shard_of(job.key) == 1]
    assert calls.count == 1
    assert calls.instances == {node.node_id for job in new for node in job.nodes}
    assert run.report.evaluated == len(registry.list_active(1))


def collect_for_cycle_result(registry: Registry, cloudwatch: Any) -> CollectionResult:
    from osprey_control.metrics import collect  # noqa: PLC0415 - the collector the step itself uses

    return collect(registry.list_active(), client=cloudwatch, now=NOW)


def test_a_snapshot_round_trips_and_refuses_other_bytes() -> None:
    # Given a collection with node values, job values and a problem
    key = JobKey(Backend.EKS, "team/job#1")
    result = CollectionResult(
        {
            key: JobMetrics(
                "team/job#1",
                (NodeMetrics("pod-0", {"gpu_utilization": 87.5}),),
                {"queue_wait": 3.0},
                "eks",
                "j",
            )
        }
    )
    # When encoded and decoded, then it is the same collection; anything else is a SnapshotError
    assert decode(encode(result)).metrics == result.metrics
    with pytest.raises(SnapshotError):
        decode(b"not a snapshot")


def test_a_part_too_large_for_an_item_is_not_stored(aws: tuple[Any, Any]) -> None:
    # Given a body over the item budget, when stored, then nothing is written and the shard reads for itself
    _, dynamodb = aws
    store = CollectionStore(TABLE, dynamodb)
    assert not store.put(0, 1, b"x" * (MAX_BODY_BYTES + 1))
    assert store.get(0, 1) is None
