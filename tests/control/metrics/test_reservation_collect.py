"""Given a cycle's active jobs in several pools, when the collect step adds the ``reservation`` signal, then each
pool is planned on its own from what the registry knows, only jobs whose policy reads the signal get a value,
and the value and its note travel with the shard's stored collection to derive and into the decision."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.contract import parse_block
from osprey_control.derivation import RESERVATION_NOTE, JobMetrics, compile_policy
from osprey_control.metrics import CollectionResult, add_reservations
from osprey_control.metrics.snapshot import decode
from osprey_control.policy import load_policy_text
from osprey_control.registry import Backend, JobRecord, JobStatus
from osprey_control.registry.allocation import AllocationMark, Allocations
from osprey_control.registry.collections import CollectionStore
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.steps.collect import collect_for_cycle
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.derive import derive_within
from tests.control.metrics.helpers import NOW, record
from tests.control.metrics.test_collect_step import Registry

HOUR = 3600.0

_POLICY = """
apiVersion: osprey.aws/v1
kind: PriorityDerivationPolicy
metadata: {{name: {name}}}
spec:
  derivationRules:
  - {{metric: {metric}, weight: 1, scaling: linear, minPriority: 0, maxPriority: 100}}
  reservation: {{capacityGpus: 64}}
"""


class Lookup:
    def __init__(self) -> None:
        self.compiled = {
            name: compile_policy(
                load_policy_text(_POLICY.format(name=name, metric=metric), "p").policies[0].policy
            )
            for name, metric in (("reads", "reservation"), ("ignores", "queue_wait"))
        }

    def get(self, name: str) -> Any:
        if name not in self.compiled:
            raise LookupError(name)
        return self.compiled[name]


def _job(
    name: str, *, gpus: int, running: bool, policy: str = "reads", cluster: str = "c1", prio: int = 50
) -> JobRecord:
    return record(
        Backend.EKS,
        f"ns/{name}-{hash(name) % 4}",
        [],
        name=name,
        block=parse_block({"priority_derivation_profile": policy}),
        status=JobStatus.RUNNING if running else JobStatus.PENDING,
        cluster=cluster,
        requested_gpus=gpus,
        derived_priority=prio,
    )


def _values(records: list[JobRecord], remaining: dict[str, float]) -> CollectionResult:
    return CollectionResult(
        {
            job.key: JobMetrics(
                job.native_id, (), {"remaining_time": remaining[job.name], "queue_wait": 600.0}
            )
            for job in records
        }
    )


def test_each_pool_is_planned_alone_and_only_readers_get_the_signal() -> None:
    # Given cluster c1: 24 of 64 GPUs held until 1 h from now and 32 for 10 h, a 32-GPU job first in the queue, a
    # long 8-GPU job that fits in the 8 free GPUs
    # (and in cluster c2 the same names, with nothing running: everything fits there)
    c1 = [
        _job("running", gpus=24, running=True, prio=90),
        _job("running2", gpus=32, running=True, prio=90),
        _job("big", gpus=32, running=False, prio=80),
        _job("long", gpus=8, running=False, prio=60),
        _job("other", gpus=8, running=False, policy="ignores", prio=10),
    ]
    c2 = [
        _job("big2", gpus=32, running=False, cluster="c2"),
        _job("long2", gpus=8, running=False, cluster="c2"),
    ]
    records = c1 + c2
    result = _values(
        records,
        {
            "running": HOUR,
            "running2": 10 * HOUR,
            "big": 2 * HOUR,
            "long": 5 * HOUR,
            "other": 5 * HOUR,
            "big2": HOUR,
            "long2": HOUR,
        },
    )

    # When the reservation is added
    added = add_reservations(records, result, Lookup(), now=NOW)

    # Then in c1 the 32-GPU job is the head and the long job is held for it
    value = {job.name: result.metrics[job.key].job_values.get("reservation") for job in records}
    assert (value["big"], value["long"], value["running"]) == (0.75, 0.0, 1.0)
    assert "held for" in result.metrics[c1[3].key].notes[RESERVATION_NOTE]
    # And the job whose policy does not read the signal still took its place in the pool, with no value
    assert value["other"] is None
    # And c2, where everything fits, holds nobody
    assert value["big2"] == value["long2"] == 0.5
    assert added == 6


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        registry = JobRegistry(
            "osprey-reservation", boto3.client("dynamodb", region_name="us-east-1"), shards=4
        )
        registry.create_table()
        yield boto3.client("cloudwatch", region_name="us-east-1"), registry.client


def test_the_value_and_its_note_reach_the_decision_through_the_stored_collection(
    aws: tuple[Any, Any],
) -> None:
    # Given a held job and its head in different shards of one pool
    cloudwatch, dynamodb = aws
    records = [
        _job("running", gpus=24, running=True, prio=90),
        _job("running2", gpus=32, running=True, prio=90),
        _job("big", gpus=32, running=False, prio=80),
        _job("long", gpus=8, running=False, prio=60),
    ]
    started = Allocations(marks=(AllocationMark(at=NOW, running=True),))
    records = [
        job.model_copy(
            update={
                "declared_runtime_s": int(h * HOUR),
                "allocations": started if job.status is JobStatus.RUNNING else Allocations(),
            }
        )
        for job, h in zip(records, (1, 10, 2, 5), strict=True)
    ]
    registry = Registry(records)
    store = CollectionStore("osprey-reservation", dynamodb)

    # When the cycle collects, then each shard's stored part carries its jobs' reservation values
    collect_for_cycle(registry, Lookup(), store, shards=range(4), token=3, cloudwatch=cloudwatch, now=NOW)
    held = records[3]
    shard = registry.shard_of(held.key)
    part = decode(store.get(shard, 3) or b"")
    assert part.metrics[held.key].job_values["reservation"] == 0.0

    # And the shard's derive records the note in the decision's inputs, for osprey explain and history
    derive_within(
        registry,
        Lookup(),
        None,
        Deadline(lambda: 60_000.0, margin_ms=10_000),
        shard=shard,
        cloudwatch=cloudwatch,
        now=NOW,
        prior=part,
    )
    decision, _ = registry.written[held.key]
    assert "held for" in decision["inputs"]["notes"][RESERVATION_NOTE]
