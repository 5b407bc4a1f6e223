"""The demo's fleet against the deployed collector: every series it publishes is read, every series read is there.

``osprey local`` comes up on an embedded moto server (the synthesized template, the real handlers) and runs two
cycles. What the fleet published is what CloudWatch lists; what the collector reads is what
:func:`osprey_control.metrics.queries.build_series` asks GetMetricData for, given the registry's records (as the
cycle's discovery and ingest left them) and the deployed policies (SSM), exactly as the collect step builds its
queries. Also here: the demo's custom rule, a real Lambda function, answers in the decisions ``osprey explain``
shows.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.local.fleet import DEFAULT_JOBS, SimulatedFleet
from osprey.local.rules import CHECK_JOB, DEMO_POLICY, DEMO_RULE_NAME
from osprey.local.server import LocalAws, free_port
from osprey.local.session import CycleResult, LocalState, bring_up, run_cycle
from osprey_control.metrics import needs_from_policies
from osprey_control.metrics.queries import build_progress_series, build_series
from osprey_control.policy_store import PolicySource
from osprey_control.registry import JobRecord
from osprey_control.wiring import (
    CONTAINER_INSIGHTS_NAMESPACE,
    CWAGENT_NAMESPACE,
    METRICS_NAMESPACE,
    SAGEMAKER_NAMESPACE,
)

Key = tuple[str, str, tuple[tuple[str, str], ...]]  # namespace, metric name, dimensions (sorted)


def key(namespace: str, name: str, dimensions: Any) -> Key:
    pairs = [(d["Name"], d["Value"]) if isinstance(d, dict) else tuple(d) for d in dimensions]
    return namespace, name, tuple(sorted(pairs))


@pytest.fixture(scope="module")
def demo(
    template: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalAws, LocalState, list[CycleResult]]]:
    path = tmp_path_factory.mktemp("local") / "local.json"
    with pytest.MonkeyPatch.context() as patch, LocalAws(free_port()) as aws:
        patch.setenv("OSPREY_LOCAL_STATE", str(path))
        state = bring_up(aws, template, path)
        # Two cycles: the first registers the plain EKS job through the cluster's discovery step.
        yield aws, state, [run_cycle(state), run_cycle(state)]


def documents(output: str) -> list[dict[str, Any]]:
    """The JSON objects in a command's output (the in-process handlers' log lines are there too)."""
    found = []
    for line in output.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def published(state: LocalState) -> set[Key]:
    cloudwatch = state.client("cloudwatch")
    found: set[Key] = set()
    for namespace in (
        CWAGENT_NAMESPACE,
        SAGEMAKER_NAMESPACE,
        CONTAINER_INSIGHTS_NAMESPACE,
        METRICS_NAMESPACE,
    ):
        for page in cloudwatch.get_paginator("list_metrics").paginate(Namespace=namespace):
            found |= {key(namespace, m["MetricName"], m["Dimensions"]) for m in page["Metrics"]}
    # The control plane's own EMF metrics share the Osprey namespace; the runtime's series are the jobs'.
    return {
        item
        for item in found
        if item[0] != METRICS_NAMESPACE or dict(item[2]).keys() == {"Backend", "JobId", "Host"}
    }


def read_by_collector(state: LocalState, records: list[JobRecord]) -> dict[str, set[Key]]:
    policies = PolicySource(client=state.client("ssm"))
    needs = needs_from_policies(policies)
    specs, problems = build_series(records, needs=needs)
    assert problems == []
    specs += build_progress_series(records, needs=needs)
    by_backend: dict[str, set[Key]] = defaultdict(set)
    backends = {record.key: record.backend.value for record in records}
    for spec in specs:
        by_backend[backends[spec.job]].add(key(spec.namespace, spec.metric_name, spec.dimensions))
    return by_backend


def test_per_backend_the_fleet_publishes_exactly_the_series_the_collector_reads(
    demo: tuple[LocalAws, LocalState, list[CycleResult]],
) -> None:
    # Given osprey local after two cycles, with every simulated job registered
    _, state, cycles = demo
    assert [cycle.status for cycle in cycles] == ["SUCCEEDED", "SUCCEEDED"]
    records = SimulatedFleet(state.client, state.table_name, state.shards).registry.list_active()
    assert {record.name for record in records} == {job.label for job in DEFAULT_JOBS}

    # When the fleet's series are compared with the collector's queries for those records and policies
    reads = read_by_collector(state, records)
    everything = published(state)

    # Then, per backend, every series the collector reads was published ...
    never_scheduled = {  # a gang's pod that stays Pending runs no container: Container Insights has no series
        key(CONTAINER_INSIGHTS_NAMESPACE, "pod_gpu_utilization",
            [("ClusterName", "osprey-local"), ("Namespace", "ml"), ("PodName", "moe-eks-3")]),
    }  # fmt: skip
    assert set(reads) == {"batch", "sagemaker", "sagemaker-queued", "eks"}
    for backend, series in reads.items():
        assert series - everything <= never_scheduled, backend
    # ... and every series published is one the collector reads
    assert everything - set().union(*reads.values()) == set()
    # ... so no SageMaker or EKS job publishes memory bandwidth (their sources have none), the demo prints none
    assert not any(
        name == "nvidia_smi_utilization_memory" for _, name, _ in reads["sagemaker"] | reads["eks"]
    )
    loads = cycles[-1].loads
    kinds = {job.label: job.backend for job in DEFAULT_JOBS}
    assert {label for label, (_, bandwidth) in loads.items() if bandwidth is not None} == {
        label for label, backend in kinds.items() if backend == "batch"
    }


def test_no_decision_lacks_a_metric_the_demo_published(
    demo: tuple[LocalAws, LocalState, list[CycleResult]],
) -> None:
    # Given the decisions of the second cycle
    _, state, _ = demo
    records = SimulatedFleet(state.client, state.table_name, state.shards).registry.list_active()

    # Then a built-in rule has no data only where the job's backend has no such source: memory bandwidth on
    # SageMaker and EKS (the training-policy weights renormalise without it)
    missing = {
        (record.name, rule["metric"])
        for record in records
        for rule in (record.last_decision or {}).get("rules", [])
        if rule["kind"] == "builtin" and rule["outcome"] == "no-data"
    }
    expected = {
        (job.label, "memory_bandwidth_utilization")
        for job in DEFAULT_JOBS
        if job.backend != "batch" and job.policy == "training-policy"
    }
    assert missing == expected


def test_the_demo_s_spot_rule_is_a_lambda_function_whose_answers_explain_shows(
    demo: tuple[LocalAws, LocalState, list[CycleResult]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given osprey local: the rule deployed as a Lambda function with its own code, the example policy applied
    aws, state, _ = demo
    function = state.client("lambda").get_function(FunctionName=DEMO_RULE_NAME)["Configuration"]
    assert (function["Handler"], function["Runtime"]) == ("spot_risk.handler", "python3.12")
    parameter = state.client("ssm").get_parameter(Name=f"/osprey/policies/{DEMO_POLICY}")["Parameter"]
    assert function["FunctionArn"] in parameter["Value"]
    # ... checked once with a sample event at `up`, then invoked by the derive step in both cycles, per spot job
    called = [event["job"]["name"] for name, event in aws.runtime.invocations if name == DEMO_RULE_NAME]
    assert called[0] == CHECK_JOB
    assert sorted(called[1:]) == sorted(["ckpt-spot-batch", "sweep-spot-batch"] * 2)

    # When a user explains the two spot jobs
    monkeypatch.setenv("AWS_ENDPOINT_URL", state.endpoint)
    runner = CliRunner()
    explained = {}
    for job in ("ckpt-spot-batch", "sweep-spot-batch"):
        result = runner.invoke(app, ["explain", job, "--table", state.table_name, "--json"])
        assert result.exit_code == 0, result.output
        explained[job] = next(
            document["decision"] for document in documents(result.output) if "decision" in document
        )
    text = runner.invoke(app, ["explain", "ckpt-spot-batch", "--table", state.table_name])

    # Then the custom rule answered (no fallback) for both, and took 20 points (risk 0.5) off the warned one
    rules = {job: decision["rules"][2] for job, decision in explained.items()}
    assert {rule["outcome"] for rule in rules.values()} == {"answered"}
    assert rules["sweep-spot-batch"]["priority"] == pytest.approx(
        explained["sweep-spot-batch"]["base"], abs=0.01
    )
    assert rules["ckpt-spot-batch"]["priority"] == pytest.approx(
        explained["ckpt-spot-batch"]["base"] - 20, abs=0.01
    )
    assert text.exit_code == 0, text.output
    assert "answered" in text.output
    assert "fallback" not in text.output
