"""Cost controls of the collector: only the series a policy reads, each job read on one cycle in N, the other
cycles derived from the last decision's values (no state in the Lambda, no renormalised weights)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.derivation import CompiledPolicy, JobMetrics, NodeMetrics, compile_policy, derive
from osprey_control.metrics import CollectorConfig, collect, metrics_needed, needs_from_policies
from osprey_control.metrics.cadence import is_due, read_setting, turn_of
from osprey_control.metrics.queries import build_progress_series, build_series
from osprey_control.policy import load_policies
from osprey_control.registry.model import Backend, JobKey, JobRecord
from tests.conftest import REPO_ROOT
from tests.control.metrics.helpers import NOW, instance, record

POLICIES = {
    policy.name: compile_policy(policy)
    for policy in load_policies([REPO_ROOT / "policies", REPO_ROOT / "policies" / "examples"])
}
TRAINING = POLICIES["training-policy"]
EVERY_5 = CollectorConfig(every_n_cycles=5, cycle_seconds=60)


class Lookup:
    def get(self, name: str) -> CompiledPolicy:
        if name not in POLICIES:
            raise LookupError(name)
        return POLICIES[name]


class NoCalls:
    """A CloudWatch client that must not be called."""

    def get_metric_data(self, **_: Any) -> dict[str, Any]:
        raise AssertionError("GetMetricData called on a cycle that should not read")


@pytest.fixture
def cloudwatch() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-1")


def _off_turn(job: JobKey) -> Any:
    """A time at which ``job`` is not read under EVERY_5 (the cycle after its turn)."""
    for minutes in range(5):
        moment = NOW + timedelta(minutes=minutes)
        if not is_due(job, moment, every_n_cycles=5, cycle_seconds=60):
            return moment
    raise AssertionError("unreachable")


def _derived(job: JobRecord, policy: CompiledPolicy, metrics: JobMetrics) -> JobRecord:
    decision = derive(policy, metrics, 50)
    return job.model_copy(update={"last_decision": decision.to_dict(), "derived_priority": decision.priority})


def test_training_policy_reads_two_agent_series_per_node_and_no_progress() -> None:
    # Given a running Batch job on two instances under training-policy (gpu, memory bandwidth, latency)
    job = record(Backend.BATCH, "job-1", [instance("i-1"), instance("i-2")])
    needs = needs_from_policies(Lookup())
    # When its series are built with the policy's needs
    specs, problems = build_series([job], needs=needs)
    progress = build_progress_series([job], needs=needs)
    # Then per node utilization and memory utilization, plus the runtime latency once, on the lead (node 0);
    # no memory used/total, no progress
    assert problems == []
    assert sorted(spec.metric_name for spec in specs if spec.node_id == "i-1") == [
        "InterconnectLatencyMicroseconds",
        "nvidia_smi_utilization_gpu",
        "nvidia_smi_utilization_memory",
    ]
    assert sorted(spec.metric_name for spec in specs if spec.node_id == "i-2") == [
        "nvidia_smi_utilization_gpu",
        "nvidia_smi_utilization_memory",
    ]
    assert progress == []
    # And without needs every series is built: 4 agent series per node, one latency and one progress per job
    assert len(build_series([job])[0]) == 2 * 4 + 1
    assert [spec.metric_name for spec in build_progress_series([job])] == ["RemainingSeconds"]


def test_remaining_time_policies_read_progress_and_custom_rules_read_every_node_metric() -> None:
    assert "remaining_time" in metrics_needed(POLICIES["default-policy"])
    job = record(Backend.BATCH, "job-1", [instance("i-1")], block=TRAINING_BLOCK("default-policy"))
    assert len(build_progress_series([job], needs=needs_from_policies(Lookup()))) == 1
    # spot-aware-policy has a custom rule: its Lambda receives every node metric
    assert {"gpu_memory_utilization", "memory_bandwidth_utilization"} <= metrics_needed(
        POLICIES["spot-aware-policy"]
    )


def TRAINING_BLOCK(name: str) -> Any:  # noqa: N802 - reads as a constant at the call site
    from osprey_control.contract import parse_block  # noqa: PLC0415

    return parse_block({"priority_derivation_profile": name})


def test_an_unknown_policy_needs_nothing() -> None:
    job = record(Backend.BATCH, "job-1", [instance("i-1")], block=TRAINING_BLOCK("nope"))
    assert build_series([job], needs=needs_from_policies(Lookup()))[0] == []


def test_each_job_is_read_on_exactly_one_cycle_in_n_and_the_turns_spread() -> None:
    jobs = [JobKey(Backend.BATCH, f"job-{index}") for index in range(200)]
    cycles = [NOW + timedelta(minutes=minutes) for minutes in range(5)]
    # Then every job is due on exactly one of five consecutive cycles
    for job in jobs:
        assert sum(is_due(job, moment, every_n_cycles=5, cycle_seconds=60) for moment in cycles) == 1
    # And every cycle reads some of them (not all in one)
    per_cycle = [
        sum(is_due(job, moment, every_n_cycles=5, cycle_seconds=60) for job in jobs) for moment in cycles
    ]
    assert min(per_cycle) >= 20
    # And a late start within the cycle keeps its number
    job = jobs[0]
    on_turn = next(moment for moment in cycles if is_due(job, moment, every_n_cycles=5, cycle_seconds=60))
    assert is_due(job, on_turn + timedelta(seconds=45), every_n_cycles=5, cycle_seconds=60)
    assert turn_of(job, 1) == 0


def test_the_setting_comes_from_the_environment_and_is_checked() -> None:
    assert read_setting({}) == (1, 60)
    assert read_setting({"OSPREY_METRICS_EVERY_N_CYCLES": "5", "OSPREY_CYCLE_SECONDS": "30"}) == (5, 30)
    assert CollectorConfig.from_environment({"OSPREY_METRICS_EVERY_N_CYCLES": "5"}).every_n_cycles == 5
    with pytest.raises(ValueError, match="OSPREY_METRICS_EVERY_N_CYCLES"):
        read_setting({"OSPREY_METRICS_EVERY_N_CYCLES": "0"})
    with pytest.raises(ValueError, match="OSPREY_CYCLE_SECONDS"):
        read_setting({"OSPREY_CYCLE_SECONDS": "soon"})


def test_off_turn_a_job_derives_from_its_last_decision_without_calling_cloudwatch() -> None:
    # Given a job derived on its read cycle from 80 % and 60 % utilization on its two nodes
    job = record(
        Backend.BATCH, "job-1", [instance("i-1"), instance("i-2")], submitted_at=NOW - timedelta(hours=1)
    )
    read = JobMetrics(
        str(job.key),
        (
            NodeMetrics("i-1", {"gpu_utilization": 80.0, "node_interconnect_latency": 100.0}),
            NodeMetrics("i-2", {"gpu_utilization": 60.0, "node_interconnect_latency": 300.0}),
        ),
    )
    job = _derived(job, TRAINING, read)
    moment = _off_turn(job.key)
    # When a cycle that is not its turn collects it
    result = collect([job], client=NoCalls(), config=EVERY_5, now=moment, needs=needs_from_policies(Lookup()))
    # Then nothing is read, every node carries the aggregate the last decision used, job values are fresh
    assert (result.series, result.calls, result.reused) == (0, 0, 1)
    metrics = result.metrics[job.key]
    assert [node.values["gpu_utilization"] for node in metrics.nodes] == [70.0, 70.0]
    assert metrics.nodes[0].values["spot_interruption_risk"] == 0.0
    assert metrics.job_values["queue_wait"] == (moment - NOW).total_seconds() + 3600
    # And the engine gives every rule the same priority as on the read cycle (no rule lost, no renormalising)
    before = derive(TRAINING, read, 50)
    after = derive(TRAINING, metrics, 50)
    assert [rule.priority for rule in after.rules] == [rule.priority for rule in before.rules]
    assert after.target == before.target


def test_off_turn_a_running_job_keeps_the_remaining_time_its_progress_gave() -> None:
    policy = POLICIES["default-policy"]
    job = record(Backend.BATCH, "job-1", [instance("i-1")], block=TRAINING_BLOCK("default-policy"))
    job = _derived(
        job,
        policy,
        JobMetrics(
            str(job.key), (NodeMetrics("i-1", {"gpu_utilization": 90.0}),), {"remaining_time": 1234.0}
        ),
    )
    result = collect(
        [job], client=NoCalls(), config=EVERY_5, now=_off_turn(job.key), needs=needs_from_policies(Lookup())
    )
    assert result.metrics[job.key].job_values["remaining_time"] == 1234.0


@pytest.mark.parametrize("case", ["new job", "policy changed", "two aggregations differ"])
def test_off_turn_a_job_whose_last_decision_cannot_be_reproduced_is_read(cloudwatch: Any, case: str) -> None:
    # Given a job whose last decision is missing, names other metrics than its policy, or is ambiguous
    job = record(Backend.BATCH, "job-1", [instance("i-1")])
    if case == "policy changed":
        job = _derived(
            job,
            POLICIES["aging-policy"],
            JobMetrics(str(job.key), (NodeMetrics("i-1", {"gpu_utilization": 50.0}),)),
        )
    elif case == "two aggregations differ":
        rules = [
            {"kind": "builtin", "metric": "gpu_utilization", "value": 50.0, "used": True},
            {"kind": "builtin", "metric": "gpu_utilization", "value": 20.0, "used": True},
            {"kind": "builtin", "metric": "memory_bandwidth_utilization", "value": None, "used": False},
            {"kind": "builtin", "metric": "node_interconnect_latency", "value": None, "used": False},
        ]
        job = job.model_copy(update={"last_decision": {"rules": rules}})
    # When a cycle that is not its turn collects it
    result = collect(
        [job], client=cloudwatch, config=EVERY_5, now=_off_turn(job.key), needs=needs_from_policies(Lookup())
    )
    # Then it is read (3 series for training-policy on one instance) in one call
    assert (result.series, result.calls, result.reused) == (3, 1, 0)


def _put(client: Any, value: float, at: Any) -> None:
    client.put_metric_data(
        Namespace="CWAgent",
        MetricData=[
            {
                "MetricName": "nvidia_smi_utilization_gpu",
                "Dimensions": [{"Name": "InstanceId", "Value": "i-1"}],
                "Value": value,
                "Timestamp": at,
            }
        ],
    )


def test_a_read_covers_the_cycles_since_the_previous_one(cloudwatch: Any) -> None:
    # Given a job on its read cycle and utilization datapoints 1, 2 and 3 minutes before, and one 8 before
    job = record(Backend.BATCH, "job-1", [instance("i-1")])
    turn = next(
        NOW + timedelta(minutes=m)
        for m in range(5)
        if is_due(job.key, NOW + timedelta(minutes=m), every_n_cycles=5, cycle_seconds=60)
    )
    for value, minutes in ((90.0, 1), (60.0, 2), (30.0, 3), (0.0, 8)):
        _put(cloudwatch, value, turn - timedelta(minutes=minutes))
    # When read every cycle, Then the latest datapoint is used, as always
    every = collect([job], client=cloudwatch, config=CollectorConfig(), now=turn)
    assert every.metrics[job.key].nodes[0].values["gpu_utilization"] == 90.0
    # When read every 5 cycles, Then the mean over the five minutes up to the latest datapoint is used
    five = collect([job], client=cloudwatch, config=EVERY_5, now=turn)
    assert five.metrics[job.key].nodes[0].values["gpu_utilization"] == pytest.approx(60.0)
    assert five.calls == 1


def test_every_cycle_reads_the_jobs_whose_turn_it_is_in_ceil_series_over_500_calls(cloudwatch: Any) -> None:
    # Given 20 jobs of 60 instances each, derived before
    needs = needs_from_policies(Lookup())
    jobs = []
    for i in range(20):
        job = record(Backend.BATCH, f"job-{i}", [instance(f"i-{i}-{n}") for n in range(60)])
        nodes = tuple(NodeMetrics(node.node_id, {"gpu_utilization": 50.0}) for node in job.nodes)
        jobs.append(_derived(job, TRAINING, JobMetrics(str(job.key), nodes)))
    read = 0
    for minutes in range(5):
        moment = NOW + timedelta(minutes=minutes)
        # When each of five cycles collects them
        result = collect(jobs, client=cloudwatch, config=EVERY_5, now=moment, needs=needs)
        due = sum(is_due(job.key, moment, every_n_cycles=5, cycle_seconds=60) for job in jobs)
        # Then the jobs whose turn it is are read (60 x 2 agent series, one latency each), the others reused
        assert (result.series, result.reused) == (due * 121, 20 - due)
        assert result.calls == -(-result.series // 500)
        read += due
    # And over the five cycles each job was read once
    assert read == 20
