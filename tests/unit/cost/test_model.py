"""Given a template, a fleet and the agent config, when the cost model prices a month, then every line's figure
is what its arithmetic says, the total is the sum of the lines, the counts come from the artifacts (state
transitions from the state machine definition, series from the collector's own queries) and scale as they
should."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest

from osprey.cost import (
    PRICES,
    CostReport,
    FleetShape,
    agent_metrics,
    estimate,
    metric_load,
    read_template,
    synthetic_fleet,
)
from osprey.cost.model import SECONDS_PER_MONTH, count_cycle
from osprey.cost.prices import custom_metric_tiers
from osprey.cost.source import default_agent_config
from osprey.cost.template import TemplateError
from tests.unit.cost.tiny_template import evaluate_arithmetic, tiny_template

AGENT = json.loads(default_agent_config().read_text())


def _report(
    template: dict[str, Any] | None = None,
    nodes: int = 64,
    jobs: int = 20,
    cycle: int = 60,
    agent: bool = False,
) -> CostReport:
    facts = read_template(template or tiny_template())
    shape = FleetShape(nodes, 8, jobs)
    load = metric_load(synthetic_fleet(shape), int(facts.setting("shards", "OSPREY_REGISTRY_SHARDS")))
    return estimate(facts, shape, load, cycle, agent=agent_metrics(AGENT, gpus_per_node=8) if agent else None)


def _line(report: CostReport, prefix: str) -> float:
    return next(line.monthly_usd for line in report.lines if line.item.startswith(prefix))


@pytest.mark.parametrize(
    ("nodes", "jobs", "cycle"), [(64, 20, 60), (256, 100, 60), (8, 30, 20), (1, 1, 86_400)]
)
def test_every_arithmetic_string_evaluates_to_its_line(nodes: int, jobs: int, cycle: int) -> None:
    # Given any fleet, When the month is priced (fleet lines included)
    report = _report(nodes=nodes, jobs=jobs, cycle=cycle, agent=True)
    # Then each arithmetic string, stripped of its labels, evaluates to the line's dollars
    for line in report.lines:
        value, shown = evaluate_arithmetic(line.arithmetic)
        assert round(value, 2) == pytest.approx(line.monthly_usd, abs=0.005), line.arithmetic
        assert shown == line.monthly_usd
    # And the total is the sum of the lines
    assert report.monthly_usd == pytest.approx(sum(line.monthly_usd for line in report.lines), abs=0.005)


def test_state_transitions_are_counted_from_the_definition() -> None:
    # Given the same fleet and a Standard cycle, When the state machine gains one Pass state on the cycle's path
    before = _line(_report(tiny_template(kind="STANDARD")), "Step Functions")
    after = _line(_report(tiny_template(kind="STANDARD", extra_pass=True)), "Step Functions")
    # Then the bill grows by exactly one transition per cycle
    one_transition = SECONDS_PER_MONTH / 60 * PRICES["sfn_standard_transition"].unit_price
    assert after - before == pytest.approx(one_transition, abs=0.01)


def test_an_express_cycle_bills_its_executions_and_their_duration_not_transitions() -> None:
    # Given the same fleet, When the cycle is Express rather than Standard
    express = _report(tiny_template(kind="EXPRESS"))
    standard = _report(tiny_template(kind="STANDARD"))
    items = {line.item for line in express.lines}
    # Then it bills one request per execution and its duration at 64 MB, and no state transitions
    assert {"Step Functions Express requests", "Step Functions Express duration"} <= items
    assert not any("transitions" in item for item in items)
    requests = SECONDS_PER_MONTH / 60 * PRICES["sfn_express_request"].unit_price
    assert _line(express, "Step Functions Express requests") == pytest.approx(requests, abs=0.005)
    # And a state more on the path adds only its own seconds, far below a transition a cycle
    longer = _report(tiny_template(kind="EXPRESS", extra_pass=True))
    assert _line(longer, "Step Functions Express duration") >= _line(
        express, "Step Functions Express duration"
    )
    assert sum(line.monthly_usd for line in express.lines if "Step" in line.item) < 0.1 * _line(
        standard, "Step Functions Standard"
    )


def test_the_walk_enters_each_busy_shard_once_and_invokes_the_template_functions() -> None:
    # Given the tiny template, When one cycle is walked with 3 busy shards
    facts = read_template(tiny_template())
    counts = count_cycle(facts, 3, cycle_seconds=60)
    # Then the Map state is entered once and its iteration state once per shard
    assert counts.last.states.count("DeriveShards") == 1
    assert counts.last.states.count("DeriveShardsShard") == 3
    assert (
        counts.last.transitions == 10 + 3
    )  # lease, choice, plan, choice, map, apply, plan, finish, choice, end
    assert [facts.functions[f].handler.split(".")[1] for f in counts.last.invocations] == [
        "lease", "shards", "collect", "derive", "derive", "derive", "apply", "plan", "finish",
    ]  # fmt: skip
    assert counts.loop is None


def test_sub_minute_cycles_loop_through_wait_and_pass() -> None:
    # Given a 20 s interval, When the execution is walked
    counts = count_cycle(read_template(tiny_template()), 2, cycle_seconds=20)
    # Then one execution a minute runs three cycles, two of them through WaitForNextCycle and NextCycle
    assert counts.cycles == 3
    assert counts.loop is not None
    assert counts.loop.states[-2:] == ("WaitForNextCycle", "NextCycle")
    assert counts.loop.transitions == counts.last.transitions + 1  # Wait + Pass instead of the Succeed


def test_a_template_without_the_cycle_state_machine_is_refused() -> None:
    with pytest.raises(TemplateError, match="AcquireLease"):
        read_template({"Resources": {}})


def test_series_come_from_the_collector_queries() -> None:
    # Given 64 EC2 nodes running 20 jobs over 16 shards, without the policy's needs (every series)
    load = metric_load(synthetic_fleet(FleetShape(64, 8, 20)), 16, needs=None)
    # Then each node has 4 nvidia_smi series, each job the runtime's latency (lead host) and 1 progress series
    assert load.node_series == 64 * 4 + 20
    assert load.progress_series == 20 * 1
    # And one collection reads them all: ceil(series / 500) calls, whatever the number of shards
    assert load.calls == math.ceil(load.series / 500) == 1
    assert sum(load.jobs_per_shard.values()) == 20
    # And beyond 500 series it takes ceil(series / 500) calls
    big = metric_load(synthetic_fleet(FleetShape(300, 8, 1)), 16, needs=None)
    assert big.calls == math.ceil((300 * 4 + 1 + 1) / 500)


def test_the_shipped_training_policy_needs_two_series_per_node_one_per_job_and_no_progress() -> None:
    # Given training-policy (gpu utilization, memory bandwidth, interconnect latency)
    load = metric_load(synthetic_fleet(FleetShape(64, 8, 20, "training-policy")), 16)
    # Then 2 nvidia_smi series per node and the latency per job; no remaining_time rule, so no progress series
    assert (load.node_series, load.progress_series) == (64 * 2 + 20, 0)
    # And the runtime series the control plane reads (and so bills) are the lead's latency, one per job
    assert load.runtime_series == 20


def test_the_default_policy_needs_one_series_per_node_and_the_remaining_time_per_job() -> None:
    # Given default-policy (gpu utilization on nodes; remaining time, requested GPUs, aging from the job)
    load = metric_load(synthetic_fleet(FleetShape(64, 8, 20)), 16)
    # Then one nvidia_smi series per node and one RemainingSeconds series per running job, read and billed
    assert (load.node_series, load.progress_series, load.runtime_series) == (64, 20, 20)


def test_reading_one_cycle_in_n_divides_the_series_and_spreads_the_calls() -> None:
    load = metric_load(synthetic_fleet(FleetShape(2048, 8, 100)), 16)
    series, calls = load.per_cycle(5)
    assert series == load.series / 5
    # every job is read once in five cycles: each cycle reads its fifth in ceil(its series / 500) calls
    assert load.calls == math.ceil(load.series / 500)
    assert 1 <= calls < load.calls
    assert load.per_cycle(1) == (load.series, load.calls)


def test_the_cadence_comes_from_the_collect_function_environment() -> None:
    shape = FleetShape(64, 8, 20)
    load = metric_load(synthetic_fleet(shape), 16)
    every = tiny_template()
    fifth = tiny_template()
    for resource in fifth["Resources"].values():
        if str(resource["Properties"].get("Handler", "")).startswith("osprey_handlers.collect."):
            resource["Properties"]["Environment"]["Variables"]["OSPREY_METRICS_EVERY_N_CYCLES"] = "5"
    full = _line(estimate(read_template(every), shape, load, 60), "CloudWatch GetMetricData")
    part = _line(estimate(read_template(fifth), shape, load, 60), "CloudWatch GetMetricData")
    assert part == pytest.approx(full / 5, abs=0.01)


def test_more_jobs_than_nodes_leaves_the_rest_queued() -> None:
    records = synthetic_fleet(FleetShape(2, 8, 5))
    assert [len(record.nodes) for record in records] == [1, 1, 0, 0, 0]
    assert metric_load(records, 16, needs=None).progress_series == 2 * 1


def test_get_metric_data_grows_with_nodes_and_step_functions_with_the_cycle_rate() -> None:
    small, large = _report(nodes=64), _report(nodes=256)
    # one series per node (default-policy) and one per job: 4x the nodes is more than 3x the bill
    assert _line(large, "CloudWatch GetMetricData") > 3 * _line(small, "CloudWatch GetMetricData")
    minute, two_minutes = _report(cycle=60), _report(cycle=120)
    assert _line(two_minutes, "Step Functions") == pytest.approx(
        _line(minute, "Step Functions") / 2, abs=0.01
    )
    assert _line(two_minutes, "CloudWatch GetMetricData") == pytest.approx(
        _line(minute, "CloudWatch GetMetricData") / 2, abs=0.01
    )


def test_lambda_compute_follows_the_template_architecture() -> None:
    x86 = _report(tiny_template(architecture="x86_64"))
    arm = _report(tiny_template(architecture="arm64"))
    assert _line(arm, "Lambda compute (arm64)") == pytest.approx(
        _line(x86, "Lambda compute (x86_64)") * 0.8, abs=0.02
    )


def test_per_job_metrics_add_two_series_per_job() -> None:
    off = _line(_report(tiny_template(per_job=False), jobs=20), "CloudWatch custom metrics")
    on = _line(_report(tiny_template(per_job=True), jobs=20), "CloudWatch custom metrics")
    assert on - off == pytest.approx(2 * 20 * 0.30)


def test_agent_metrics_follow_the_agent_config() -> None:
    # Given the shipped config (rollups only), Then 4 nvidia_smi metrics per node, flushed each minute
    shipped = agent_metrics(AGENT, gpus_per_node=8)
    assert (shipped.per_node, shipped.flush_seconds) == (4, 60)
    # When the GPU originals are kept, Then 4 rollups + 4 x 8 per-GPU originals
    changed = json.loads(json.dumps(AGENT))
    changed["metrics"]["metrics_collected"]["nvidia_gpu"]["drop_original_metrics"] = []
    assert agent_metrics(changed, gpus_per_node=8).per_node == 4 + 4 * 8
    # When an efa section is added back (rolled up only), Then 4 more per node
    changed = json.loads(json.dumps(AGENT))
    changed["metrics"]["metrics_collected"]["efa"] = {
        "measurement": ["rdma_read_bytes", "rdma_write_bytes", "retrans_pkts", "retrans_timeout_events"],
        "drop_original_metrics": [
            "rdma_read_bytes",
            "rdma_write_bytes",
            "retrans_pkts",
            "retrans_timeout_events",
        ],
    }
    assert agent_metrics(changed, gpus_per_node=8).per_node == 8


def test_custom_metric_tiers_split_the_count() -> None:
    assert custom_metric_tiers(300) == [(300, Decimal("0.30"))]
    parts = custom_metric_tiers(260_000)
    assert [count for count, _ in parts] == [10_000, 240_000, 10_000]


def test_every_price_names_its_source_page() -> None:
    assert all(price.source.startswith("https://aws.amazon.com/") for price in PRICES.values())
