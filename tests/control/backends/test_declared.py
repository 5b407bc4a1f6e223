"""Given job descriptions as AWS writes them, when their declarations are read, then the declared runtime limit
and the GPUs the job asks for are what the scheduler was told, and anything unknown stays None (never 0).
(Read from events at ingest: tests/control/ingest/test_declared.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from osprey_control.backends.declared import (
    batch_declared_runtime,
    batch_requested_gpus,
    kubernetes_container_gpus,
    sagemaker_declared_runtime,
    sagemaker_requested_gpus,
    smallest,
)

GPU = {"type": "GPU", "value": "4"}


def _container(*requirements: dict[str, str]) -> dict[str, Any]:
    return {"image": "trainer", "resourceRequirements": [{"type": "VCPU", "value": "8"}, *requirements]}


@pytest.mark.parametrize(
    ("resource_config", "expected"),
    [
        ({"InstanceType": "ml.p5.48xlarge", "InstanceCount": 4}, 32),
        ({"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1}, 1),
        ({"InstanceGroups": [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "InstanceGroupName": "a"},
                             {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1, "InstanceGroupName": "b"}]}, 20),
        ({"InstanceGroups": [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "InstanceGroupName": "a"},
                             {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "InstanceGroupName": "cpu"}]}, None),
        ({"InstanceType": "ml.m5.xlarge", "InstanceCount": 2}, None),
        (None, None),
    ],
)  # fmt: skip
def test_given_a_resource_config_when_counting_gpus_then_unknown_types_make_the_total_unknown(
    resource_config: Any, expected: int | None
) -> None:
    assert sagemaker_requested_gpus(resource_config) == expected


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        ({"container": _container(GPU)}, 4),
        ({"container": _container()}, None),
        ({"nodeProperties": {"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [
            {"targetNodes": "0:", "container": _container({"type": "GPU", "value": "8"})}]}}, 32),
        ({"nodeProperties": {"numNodes": 3, "mainNode": 0, "nodeRangeProperties": [
            {"targetNodes": "0", "container": _container()},
            {"targetNodes": "1:2", "container": _container({"type": "GPU", "value": "8"})}]}}, 16),
        ({"ecsProperties": {"taskProperties": [{"containers": [_container(GPU), _container(GPU)]}]}}, 8),
        ({"eksProperties": {"podProperties": {"containers": [
            {"name": "t", "resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "1"}}},
            {"name": "u", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}, 3),
    ],
)  # fmt: skip
def test_given_a_batch_job_detail_when_counting_gpus_then_every_node_and_container_counts(
    detail: dict[str, Any], expected: int | None
) -> None:
    assert batch_requested_gpus(detail) == expected


def test_given_malformed_or_absent_limits_when_read_then_they_are_unknown_never_zero() -> None:
    assert sagemaker_declared_runtime({"StoppingCondition": {"MaxRuntimeInSeconds": 0}}) is None
    assert sagemaker_declared_runtime({"StoppingCondition": {"MaxRuntimeInSeconds": True}}) is None
    assert sagemaker_declared_runtime({}) is None
    assert batch_declared_runtime({"timeout": {"attemptDurationSeconds": "x"}}) is None
    assert batch_declared_runtime({"timeoutConfig": {"attemptDurationSeconds": 600}}) == 600
    assert kubernetes_container_gpus([{"resources": {"limits": {"nvidia.com/gpu": "-1"}}}]) == 0
    assert smallest(None, 600, 300) == 300
    assert smallest(None, None) is None
