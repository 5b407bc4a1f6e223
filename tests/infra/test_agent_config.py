"""Given the shipped GPU node agent configuration (``infra/agent/cloudwatch-agent-gpu.json``) and EKS add-on
settings (``infra/agent/eks-observability-addon.json``), then the agent file is valid against the CloudWatch
agent's JSON Schema (the vendored subset in ``tests/infra/data``), and it publishes exactly the series the
collector queries (DESIGN §3): ``CWAgent`` ``nvidia_smi_*`` rolled up to ``InstanceId`` alone, sampled often
enough for the collector's 60 s period; and the add-on turns on Container Insights GPU metrics."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from jsonschema import Draft4Validator

from osprey_control.contract import parse_block
from osprey_control.metrics.collector import CollectorConfig
from osprey_control.metrics.queries import build_series
from osprey_control.registry.model import Backend, JobRecord, JobStatus, NodeKind, NodeRef
from osprey_control.wiring import CONTAINER_INSIGHTS_NAMESPACE, CWAGENT_NAMESPACE
from tests.conftest import REPO_ROOT

AGENT_FILE = REPO_ROOT / "infra" / "agent" / "cloudwatch-agent-gpu.json"
ADDON_FILE = REPO_ROOT / "infra" / "agent" / "eks-observability-addon.json"
SCHEMA_FILE = REPO_ROOT / "tests" / "infra" / "data" / "cloudwatch-agent-schema.subset.json"
# The agent's translator reads the user key nvidia_gpu and publishes its measurements as nvidia_smi_<name>.
GPU_SECTION, GPU_PREFIX = "nvidia_gpu", "nvidia_smi_"


def _load(path: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


@pytest.fixture(scope="module")
def agent() -> dict[str, Any]:
    return _load(AGENT_FILE)


@pytest.fixture(scope="module")
def validator() -> Draft4Validator:
    schema = _load(SCHEMA_FILE)
    Draft4Validator.check_schema(schema)
    return Draft4Validator(schema)


def _record(backend: Backend, node: NodeRef) -> JobRecord:
    return JobRecord(
        backend=backend,
        native_id="job-1",
        name="job-1",
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=JobStatus.RUNNING,
        status_time=datetime(2026, 12, 3, tzinfo=UTC),
        nodes=(node,),
        cluster="gpu-a" if node.kind is NodeKind.POD else None,
    )


def _queried(namespace: str, record: JobRecord) -> list[tuple[str, tuple[str, ...]]]:
    specs, problems = build_series([record])
    assert problems == []
    return [(s.metric_name, tuple(n for n, _ in s.dimensions)) for s in specs if s.namespace == namespace]


def test_agent_file_is_valid_against_the_agent_schema(
    agent: dict[str, Any], validator: Draft4Validator
) -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(agent)]
    assert errors == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("metrics", "metrics_collected", GPU_SECTION, "metrics_collection_interval"), "10s"),
        (("metrics", "aggregation_dimensions"), ["InstanceId"]),
        (("metrics", "metrics_destination"), {}),
        (("metrics", "metrics_collected", GPU_SECTION, "measurement"), None),
    ],
)
def test_schema_check_rejects_a_broken_file(
    agent: dict[str, Any], validator: Draft4Validator, path: tuple[str, ...], value: Any
) -> None:
    # So the validity test above can fail: a string interval, a flat rollup list, a misspelt section, and a
    # GPU section without measurements are each refused.
    broken = copy.deepcopy(agent)
    target = broken
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    assert list(validator.iter_errors(broken))


def test_every_series_the_collector_queries_is_published_rolled_up_by_instance(agent: dict[str, Any]) -> None:
    metrics = agent["metrics"]
    queried = _queried(
        CWAGENT_NAMESPACE, _record(Backend.BATCH, NodeRef(node_id="i-1", kind=NodeKind.INSTANCE))
    )
    assert queried
    assert metrics.get("namespace", "CWAgent") == CWAGENT_NAMESPACE
    published = {GPU_PREFIX + name for name in metrics["metrics_collected"][GPU_SECTION]["measurement"]}
    # Exactly those: each extra measurement is one more custom metric per node, billed monthly.
    assert published == {name for name, _ in queried}
    for name, dimensions in queried:
        # The collector's MetricStat names InstanceId alone: that series exists only as the agent's rollup.
        assert list(dimensions) in metrics["aggregation_dimensions"], (name, dimensions)
    assert metrics["append_dimensions"] == {"InstanceId": "${aws:InstanceId}"}


def test_only_rolled_up_series_are_kept_to_bound_the_metric_count(agent: dict[str, Any]) -> None:
    # Each original series also carries index/name/arch: 8x the metrics per node of an 8-GPU instance.
    # Dropping them is safe only because every measurement is rolled up by InstanceId.
    collected = agent["metrics"]["metrics_collected"]
    assert ["InstanceId"] in agent["metrics"]["aggregation_dimensions"]
    assert sorted(collected[GPU_SECTION]["drop_original_metrics"]) == sorted(
        collected[GPU_SECTION]["measurement"]
    )


def test_sampling_fits_the_collector_period(agent: dict[str, Any]) -> None:
    period = CollectorConfig().period_seconds
    gpu = agent["metrics"]["metrics_collected"][GPU_SECTION]["metrics_collection_interval"]
    # Several samples per period, so one idle instant between steps does not read as an idle GPU.
    assert period % gpu == 0
    assert period // gpu >= 6
    assert agent["metrics"]["force_flush_interval"] <= period


def test_nothing_is_published_that_no_query_reads(agent: dict[str, Any]) -> None:
    # Given the collector reads only the nvidia_smi rollups (EFA retransmit counters are not used as a latency
    # proxy: the runtime measures the latency itself), Then the agent collects no other section: 4 efa_*
    # metrics per node would cost $1.20 a node a month for nothing.
    assert set(agent["metrics"]["metrics_collected"]) == {GPU_SECTION}


def test_eks_add_on_turns_on_container_insights_gpu_metrics() -> None:
    addon = _load(ADDON_FILE)
    kubernetes = addon["agent"]["config"]["logs"]["metrics_collected"]["kubernetes"]
    assert kubernetes["enhanced_container_insights"] is True
    assert kubernetes["accelerated_compute_metrics"] is True
    assert kubernetes["metrics_collection_interval"] <= CollectorConfig().period_seconds
    # What the collector asks Container Insights for (enhanced observability, pod level).
    queried = _queried(
        CONTAINER_INSIGHTS_NAMESPACE, _record(Backend.EKS, NodeRef(node_id="trainer-0", kind=NodeKind.POD))
    )
    assert queried == [
        ("pod_gpu_utilization", ("ClusterName", "Namespace", "PodName")),
        ("pod_gpu_memory_utilization", ("ClusterName", "Namespace", "PodName")),
    ]
