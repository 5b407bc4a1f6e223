"""Property: any permutation, with duplicates, of an event stream for several jobs (state changes on changing
instances, spot warnings before or after the job is known) leaves the registry in one state.

The compared projection is every item of the table except three attributes that legitimately depend on
delivery order: a job item's ``version`` (it counts effective writes, and a late event that changes nothing
writes nothing) and the ``ttl`` of an instance→job link (set by whichever event first named the instance).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from osprey_control.ingest import Ingestor, Recogniser
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.ingest.conftest import BATCH, INTERRUPTION, REBALANCE, load_event

JOBS = ("job-a", "job-b", "job-c")
INSTANCES = ("i-00000000000000001", "i-00000000000000002", "i-00000000000000003")
STATUSES = ("SUBMITTED", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED")
NAMES = ("resnet-finetune", "resnet-finetune-v2")


def _container_instance(instance: str) -> str:
    return f"arn:aws:ecs:us-east-1:123456789012:container-instance/ce/{instance}"


class FakeEcs:
    """The EC2 instance of a container instance is the ARN's last part (enough for the property)."""

    def describe_container_instances(self, cluster: str, containerInstances: list[str]) -> dict[str, Any]:  # noqa: N803
        return {
            "containerInstances": [{"ec2InstanceId": arn.rsplit("/", 1)[-1]} for arn in containerInstances]
        }


def _time(minute: int) -> str:
    return f"2026-03-01T12:{minute:02d}:00Z"


@st.composite
def job_event(draw: st.DrawFn) -> dict[str, Any]:
    event = load_event(BATCH)
    detail = event["detail"]
    event["time"] = _time(draw(st.integers(0, 9)))  # few distinct times: ties are common
    detail["jobId"] = draw(st.sampled_from(JOBS))
    detail["jobArn"] = f"arn:aws:batch:us-east-1:123456789012:job/{detail['jobId']}"
    detail["jobName"] = draw(st.sampled_from(NAMES))
    detail["status"] = draw(st.sampled_from(STATUSES))
    detail["createdAt"] = 1772366400000 + draw(st.integers(0, 3)) * 1000
    instance = draw(st.none() | st.sampled_from(INSTANCES))
    if instance is None:
        del detail["container"]["containerInstanceArn"]
    else:
        detail["container"]["containerInstanceArn"] = _container_instance(instance)
    return event


@st.composite
def spot_event(draw: st.DrawFn) -> dict[str, Any]:
    event = load_event(draw(st.sampled_from((INTERRUPTION, REBALANCE))))
    event["time"] = _time(draw(st.integers(0, 9)))
    event["detail"]["instance-id"] = draw(st.sampled_from(INSTANCES))
    return event


@st.composite
def stream_and_replay(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    events = draw(st.lists(job_event() | spot_event(), min_size=1, max_size=12))
    duplicates = draw(st.lists(st.sampled_from(events), max_size=6))
    replay = draw(st.permutations(events + duplicates))
    return events, replay


_TABLES = itertools.count()


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    # One moto session for all examples (entering mock_aws per example would dominate the run time).
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def _projection(client: Any, events: list[dict[str, Any]]) -> list[str]:
    table = f"convergence-{next(_TABLES)}"
    registry = JobRegistry(table, client, shards=4)
    registry.create_table()
    ingestor = Ingestor(registry, recogniser=Recogniser(by_environment=False), ecs=FakeEcs())
    for event in events:
        ingestor.ingest(event)
    items = []
    for item in client.scan(TableName=table)["Items"]:
        if item["sk"]["S"] == "META":
            item.pop("version")
        elif item["pk"]["S"].startswith("INSTANCE#") and item["sk"]["S"].startswith("JOB#"):
            item.pop("ttl")
        items.append(json.dumps(item, sort_keys=True))
    client.delete_table(TableName=table)
    return sorted(items)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(stream_and_replay())
def test_permutations_with_duplicates_converge(
    client: Any, case: tuple[list[dict[str, Any]], list[dict[str, Any]]]
) -> None:
    events, replay = case
    # Given the stream delivered once in order, and again shuffled with duplicates
    expected = _projection(client, events)
    actual = _projection(client, replay)
    # Then the registries are the same
    assert actual == expected
