"""Given the real CDK app synthesized in-process, when the cost model reads it, then the cycle's transitions,
its Lambda invocations and their memory come from that template, and the month at 64 nodes is what
docs/deploy.md shows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from osprey.cost import (
    FleetShape,
    TemplateFacts,
    agent_metrics,
    estimate,
    metric_load,
    read_template,
    synthetic_fleet,
)
from osprey.cost.model import count_cycle
from osprey.cost.source import default_agent_config, synthesize


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return synthesize()


@pytest.fixture(scope="module")
def facts(template: dict[str, Any]) -> TemplateFacts:
    return read_template(template)


def test_one_cycle_enters_eleven_states_plus_one_per_busy_shard(facts: TemplateFacts) -> None:
    counts = count_cycle(facts, 12, cycle_seconds=60)
    assert counts.last.transitions == 11 + 12
    assert counts.last.states[:5] == (
        "AcquireLease",
        "LeaseAcquired",
        "PlanShards",
        "CollectMetrics",
        "DeriveShards",
    )
    assert counts.last.states[-6:] == (
        "ApplyPriorities", "PlanParallelism", "MarkSucceeded", "Finish", "CycleOutcome", "CycleSucceeded",
    )  # fmt: skip
    handlers = [facts.functions[logical_id].handler for logical_id in counts.last.invocations]
    assert handlers.count("osprey_handlers.derive.handler") == 12
    assert handlers.count("osprey_handlers.collect.handler") == 1
    assert len(handlers) == 12 + 6


def test_the_cycle_is_read_as_express_with_its_map_concurrency(facts: TemplateFacts) -> None:
    assert facts.cycle_type == "EXPRESS"
    assert facts.map_concurrency("DeriveShards") == 16


def test_memory_and_settings_come_from_the_template(facts: TemplateFacts) -> None:
    assert facts.function_by_handler("derive").memory_mb == 512
    assert facts.function_by_handler("plan").memory_mb == 1024
    assert facts.setting("shards", "OSPREY_REGISTRY_SHARDS") == "16"
    assert facts.cycle_log_level == "ALL"
    assert facts.dashboards == 1


def test_the_month_at_64_nodes_is_the_documented_one(facts: TemplateFacts) -> None:
    shape = FleetShape(64, 8, 20)
    report = estimate(
        facts,
        shape,
        metric_load(synthetic_fleet(shape), 16),
        60,
        agent=agent_metrics(json.loads(default_agent_config().read_text()), gpus_per_node=8),
    )
    lines = {line.item: line.monthly_usd for line in report.lines}
    # default-policy: each job read on one cycle in five (the template's OSPREY_METRICS_EVERY_N_CYCLES), one
    # series per node and the remaining time of each running job, in one call a cycle
    assert lines["CloudWatch GetMetricData (calls per cycle: 1)"] == 7.26
    assert lines["Step Functions Express requests"] == 0.04
    assert lines["CloudWatch custom metrics (runtime and control plane EMF)"] == 8.70
    assert lines["Fleet: CloudWatch agent custom metrics"] == 76.80
    # And the goal of issue 14: at most $40 a month for the control plane at 64 nodes
    assert report.monthly_usd - sum(value for item, value in lines.items() if item.startswith("Fleet:")) <= 40
