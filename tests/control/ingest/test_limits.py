"""Given events at and just beyond ingest's bounds (osprey_control.ingest.limits), when parsed or ingested, then
an event at a bound is accepted and one beyond it is refused before anything is built, and a job at every bound
at once stays under half of DynamoDB's 400 KB item limit."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from osprey_control.backends.declared import batch_requested_gpus, sagemaker_declared_runtime
from osprey_control.backends.limits import MAX_HOSTS, MAX_RESERVED_TAGS, MAX_TAGS
from osprey_control.backends.sagemaker import hosts as hosts_module
from osprey_control.ingest import (
    Ingestor,
    JobEvent,
    MalformedEventError,
    OverLimitError,
    Recogniser,
    parse_event,
)
from osprey_control.ingest.limits import MAX_CLOCK_SKEW
from osprey_control.ingest.service import decode_body
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.model import NodeRef
from tests.control.ingest.conftest import BATCH, SAGEMAKER, TABLE, load_event

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _attribute_bytes(value: dict[str, Any]) -> int:
    """DynamoDB's item size rules: UTF-8 bytes of strings, about half a byte per digit of numbers, 3 bytes of
    overhead per list or map plus 1 per element."""
    ((kind, content),) = value.items()
    if kind == "S":
        return len(content.encode())
    if kind == "N":
        return (len(content.lstrip("-").replace(".", "")) + 1) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + _attribute_bytes(element) for element in content)
    if kind == "M":
        return 3 + sum(1 + len(key.encode()) + _attribute_bytes(element) for key, element in content.items())
    raise AssertionError(f"unexpected attribute type {kind}")


def _sagemaker(**detail: Any) -> dict[str, Any]:
    event = load_event(SAGEMAKER)
    event["detail"].update(detail)
    return event


def _tags(user_tags: int, reserved: int = 0) -> dict[str, str]:
    tags = {"osprey:enabled": "true", "osprey:policy": "training-policy"}
    tags.update({f"k{index:03d}".ljust(128, "k"): "v" * 256 for index in range(user_tags - len(tags))})
    tags.update({f"aws:{index:03d}".ljust(128, "k"): "v" * 256 for index in range(reserved)})
    return tags


def test_a_job_at_every_bound_stays_under_half_the_item_limit(registry: JobRegistry, dynamodb: Any) -> None:
    # Given a SageMaker job with the longest name, MAX_HOSTS hosts of the longest instance type over four
    # groups, and MAX_TAGS user tags and MAX_RESERVED_TAGS aws: tags of the longest keys and values
    name = "a" * 63
    event = _sagemaker(
        TrainingJobName=name,
        TrainingJobArn=f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        ResourceConfig={
            "InstanceGroups": [{"InstanceType": "ml." + "x" * 37, "InstanceCount": MAX_HOSTS // 4}] * 4
        },
        Tags=_tags(MAX_TAGS, MAX_RESERVED_TAGS),
    )
    # When it is ingested
    outcome = Ingestor(registry, recogniser=Recogniser(by_environment=False)).ingest_message(
        json.dumps(event)
    )
    # Then it is registered and its item is under 200 KB
    assert outcome.action == "registered"
    (item,) = dynamodb.scan(TableName=TABLE)["Items"]
    size = sum(len(key.encode()) + _attribute_bytes(value) for key, value in item.items())
    assert len(item["nodes"]["L"]) == MAX_HOSTS
    assert size < 200 * 1024


def test_hosts_at_the_bound_are_built_and_one_more_is_refused() -> None:
    at_bound = _sagemaker(ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": MAX_HOSTS})
    parsed = parse_event(at_bound)
    assert isinstance(parsed, JobEvent)
    assert len(parsed.nodes) == MAX_HOSTS
    beyond = _sagemaker(
        ResourceConfig={
            "InstanceType": "ml.p4d.24xlarge",
            "InstanceCount": MAX_HOSTS - 1,
            "InstanceGroups": [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2}],
        }
    )
    with pytest.raises(OverLimitError, match=f"{MAX_HOSTS + 1} hosts"):
        parse_event(beyond)


def test_a_short_message_cannot_make_ingest_build_millions_of_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a 2 KB description of 16 groups of a billion instances each
    built: list[object] = []
    real = NodeRef

    def counting(**fields: Any) -> object:
        built.append(fields)
        return real(**fields)

    monkeypatch.setattr(hosts_module, "NodeRef", counting)
    groups = [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 10**9}] * 16
    event = _sagemaker(ResourceConfig={"InstanceGroups": groups})
    # When it is parsed, then it is refused and no host was built at all
    with pytest.raises(OverLimitError):
        parse_event(event)
    assert built == []
    # And more instance groups than any real job uses are refused before they are read
    with pytest.raises(OverLimitError, match="instance groups"):
        parse_event(_sagemaker(ResourceConfig={"InstanceGroups": [{}] * 10_000}))


@pytest.mark.parametrize(
    ("tags", "accepted"),
    [
        (_tags(MAX_TAGS), True),
        # AWS's own tags and the resourceArn entry of Batch events are not user tags
        ({**_tags(MAX_TAGS), "aws:batch:compute-environment": "ce", "resourceArn": "arn:" + "a" * 300}, True),
        (_tags(MAX_TAGS + 1), False),
        # ... but they are bounded too: 50 of them
        (_tags(MAX_TAGS, MAX_RESERVED_TAGS), True),
        (_tags(MAX_TAGS, MAX_RESERVED_TAGS + 1), False),
        ({"osprey:enabled": "true", "k" * 129: "v"}, False),
        ({"osprey:enabled": "true", "key": "v" * 257}, False),
    ],
)
def test_tags_are_capped_at_awss_limits(tags: dict[str, str], accepted: bool) -> None:
    event = _sagemaker(Tags=tags)
    if accepted:
        assert isinstance(parse_event(event), JobEvent)
    else:
        with pytest.raises(OverLimitError):
            parse_event(event)


@pytest.mark.parametrize(
    ("source", "field", "bound"),
    [(SAGEMAKER, "TrainingJobName", 63), (BATCH, "jobName", 128), (BATCH, "jobId", 128)],
)
def test_names_are_capped_at_the_backends_maximum(source: str, field: str, bound: int) -> None:
    event = load_event(source)
    event["detail"][field] = "n" * bound
    assert isinstance(parse_event(event), JobEvent)
    event["detail"][field] = "n" * (bound + 1)
    with pytest.raises(OverLimitError, match=f"{bound + 1} characters"):
        parse_event(event)


@pytest.mark.parametrize(
    ("time", "accepted"),
    [
        (NOW + MAX_CLOCK_SKEW - timedelta(seconds=1), True),
        (NOW + MAX_CLOCK_SKEW + timedelta(seconds=1), False),  # would freeze the job's description
        (datetime(1999, 12, 31, 23, 59, tzinfo=UTC), False),
    ],
)
def test_event_times_must_lie_between_2000_and_now(time: datetime, accepted: bool) -> None:
    event = load_event(BATCH)
    event["time"] = time.isoformat()
    if accepted:
        assert isinstance(parse_event(event, now=NOW), JobEvent)
    else:
        with pytest.raises(MalformedEventError, match="outside"):
            parse_event(event, now=NOW)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 10**400, 1e30, -5, "1" * 400, "²"])
def test_a_timestamp_no_datetime_holds_is_no_time(value: Any) -> None:
    event = load_event(BATCH)
    event["time"] = value
    with pytest.raises(MalformedEventError, match="time must be"):
        parse_event(event)


@pytest.mark.parametrize("body", ['{"time": NaN}', '{"a": Infinity}', "[" * 100_000, "x" * (256 * 1024 + 1)])
def test_bodies_json_does_not_allow_or_eventbridge_never_sends_are_refused(body: str) -> None:
    with pytest.raises(MalformedEventError):
        decode_body(body)


def test_absurd_declared_values_are_unknown_not_stored() -> None:
    assert sagemaker_declared_runtime({"StoppingCondition": {"MaxRuntimeInSeconds": 10**40}}) is None
    assert sagemaker_declared_runtime({"StoppingCondition": {"MaxRuntimeInSeconds": "²"}}) is None
    container = {"container": {"resourceRequirements": [{"type": "GPU", "value": "9" * 50}]}}
    assert batch_requested_gpus(container) is None
    node_range = {
        "targetNodes": "0:999999999999",
        "container": {"resourceRequirements": [{"type": "GPU", "value": "8"}]},
    }
    assert (
        batch_requested_gpus({"nodeProperties": {"numNodes": 2, "nodeRangeProperties": [node_range]}}) is None
    )
