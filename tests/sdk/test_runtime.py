"""``osprey.runtime``: OSPREY_* config and EMF lines checked against the CloudWatch EMF specification."""

from __future__ import annotations

import io
import json
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from osprey import runtime
from osprey_control.contract import parse_block

NO_FILE = Path("/nonexistent/resourceconfig.json")


def assert_valid_emf(document: dict[str, Any]) -> None:
    """The EMF specification's structural rules (CloudWatch 'Embedded metric format specification')."""
    metadata = document["_aws"]
    assert isinstance(metadata["Timestamp"], int)
    assert metadata["Timestamp"] > 0
    directives = metadata["CloudWatchMetrics"]
    assert isinstance(directives, list)
    assert directives
    for directive in directives:
        assert isinstance(directive["Namespace"], str)
        assert 1 <= len(directive["Namespace"]) <= 1024
        assert isinstance(directive["Dimensions"], list)
        for dimension_set in directive["Dimensions"]:
            assert 1 <= len(dimension_set) <= 30
            for name in dimension_set:
                assert isinstance(document[name], str), f"dimension {name} must be a top-level string"
        metrics = directive["Metrics"]
        assert 1 <= len(metrics) <= 100
        for metric in metrics:
            assert isinstance(metric["Name"], str)
            assert 1 <= len(metric["Name"]) <= 1024
            assert isinstance(document[metric["Name"]], int | float), "every metric needs a top-level value"
            assert metric.get("Unit", "None") in {"Seconds", "Microseconds", "Milliseconds", "Count", "None"}


def emitted(call: Any, *args: Any) -> dict[str, Any]:
    stream = io.StringIO()
    call(*args, stream=stream)
    (line,) = stream.getvalue().splitlines()
    document: dict[str, Any] = json.loads(line)
    return document


def test_given_the_lead_sagemaker_host_when_reporting_latency_then_one_valid_emf_line_names_job_and_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given: SageMaker's environment and resource config, on the first host (the lead)
    config = tmp_path / "resourceconfig.json"
    config.write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1", "algo-2", "algo-3"]}))
    monkeypatch.setattr(runtime, "RESOURCE_CONFIG_PATH", config)
    monkeypatch.setenv("TRAINING_JOB_NAME", "pytorch-training-2024")
    monkeypatch.setenv("OSPREY_PRIORITY_POLICY", "training-policy")

    # When
    document = emitted(runtime.report_interconnect_latency, 120.5)

    # Then
    assert_valid_emf(document)
    directive = document["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "/aws/osprey"
    assert directive["Dimensions"] == [["Backend", "JobId", "Host"]]
    assert directive["Metrics"] == [{"Name": "InterconnectLatencyMicroseconds", "Unit": "Microseconds"}]
    assert document["Backend"] == "sagemaker"
    assert document["JobId"] == "pytorch-training-2024"
    assert document["Host"] == "algo-1"
    assert document["InterconnectLatencyMicroseconds"] == 120.5
    assert document["PolicyName"] == "training-policy"


def test_given_another_sagemaker_host_when_reporting_latency_then_nothing_is_printed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given: the third host of a SageMaker job, no rank known (the lead is algo-1)
    config = tmp_path / "resourceconfig.json"
    config.write_text(json.dumps({"current_host": "algo-3", "hosts": ["algo-1", "algo-2", "algo-3"]}))
    monkeypatch.setattr(runtime, "RESOURCE_CONFIG_PATH", config)
    monkeypatch.setenv("TRAINING_JOB_NAME", "pytorch-training-2024")
    stream = io.StringIO()

    # When it reports the latency it measured (the same all-reduce as the lead's)
    document = runtime.report_interconnect_latency(120.5, stream=stream)

    # Then: no line, so no custom metric for algo-3; the document is still built and validated
    assert stream.getvalue() == ""
    assert document["Host"] == "algo-3"
    with pytest.raises(ValueError, match=">= 0"):
        runtime.report_interconnect_latency(-1.0, stream=stream)


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"AWS_BATCH_JOB_ID": "abc#2", "AWS_BATCH_JOB_NODE_INDEX": "2"}, ("batch", "abc", "2")),
        ({"AWS_BATCH_JOB_ID": "abc"}, ("batch", "abc", "0")),
        (
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "OSPREY_JOB_ID": "training/resnet",
             "OSPREY_K8S_POD_NAME": "resnet-0-xyz", "HOSTNAME": "other"},
            ("eks", "training/resnet", "resnet-0-xyz"),
        ),
        ({"HOSTNAME": "laptop"}, ("unknown", "unknown", "laptop")),
        ({"AWS_BATCH_JOB_ID": "abc", "OSPREY_JOB_ID": "mine", "OSPREY_HOST": "h"}, ("batch", "mine", "h")),
    ],
)  # fmt: skip
def test_given_a_backend_environment_when_computing_dimensions_then_job_and_host_are_identified(
    environment: dict[str, str], expected: tuple[str, str, str]
) -> None:
    dimensions = runtime.job_dimensions(environment, resource_config=NO_FILE)
    assert (dimensions["Backend"], dimensions["JobId"], dimensions["Host"]) == expected


def test_given_a_namespace_override_when_reporting_step_time_then_it_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OSPREY_METRICS_NAMESPACE", "/custom/osprey")
    monkeypatch.setenv("AWS_BATCH_JOB_ID", "job-1")
    document = emitted(runtime.report_step_time, 1.25)
    assert_valid_emf(document)
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "/custom/osprey"
    assert document["StepTimeSeconds"] == 1.25
    assert document["_aws"]["CloudWatchMetrics"][0]["Metrics"] == [
        {"Name": "StepTimeSeconds", "Unit": "Seconds"}
    ]


def test_given_too_many_or_bad_metrics_when_building_emf_then_it_is_refused() -> None:
    with pytest.raises(ValueError, match="1 to 100 metrics"):
        runtime.emf_record({f"M{index}": (1.0, "Count") for index in range(101)}, environment={})
    with pytest.raises(ValueError, match="finite"):
        runtime.emf_record({"M": (float("nan"), "Count")}, environment={})
    with pytest.raises(ValueError, match=">= 0"):
        runtime.report_step_time(-1.0, stream=io.StringIO())


def test_given_100_metrics_when_building_emf_then_the_document_is_valid() -> None:
    document = runtime.emf_record(
        {f"M{index}": (float(index), "Count") for index in range(100)}, environment={}
    )
    assert_valid_emf(document)


def test_given_the_osprey_environment_when_reading_config_then_it_is_the_block() -> None:
    environment = {
        "OSPREY_ENABLED": "1",
        "OSPREY_PRIORITY_POLICY": "training-policy",
        "OSPREY_GANG_TIMEOUT": "90",
    }
    assert runtime.config(environment) == parse_block(
        {"priority_derivation_profile": "training-policy", "gang_timeout": 90}
    )
    assert runtime.config({}) is None


def test_given_no_torch_when_measuring_latency_then_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    assert runtime.measure_interconnect_latency() is None


def fake_torch(initialised: bool) -> tuple[types.ModuleType, list[Any]]:
    reduced: list[Any] = []
    torch = types.ModuleType("torch")
    dist = types.ModuleType("torch.distributed")
    dist.is_available = lambda: True  # type: ignore[attr-defined]
    dist.is_initialized = lambda: initialised  # type: ignore[attr-defined]
    dist.get_backend = lambda: "gloo"  # type: ignore[attr-defined]
    dist.all_reduce = reduced.append  # type: ignore[attr-defined]
    torch.distributed = dist  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)  # type: ignore[attr-defined]
    torch.device = lambda *args: ("device", *args)  # type: ignore[attr-defined]
    torch.ones = lambda count, device: [1.0] * count  # type: ignore[attr-defined]
    return torch, reduced


@pytest.mark.parametrize("initialised", [True, False])
def test_given_torch_when_measuring_latency_then_all_reduce_is_timed_only_with_a_process_group(
    monkeypatch: pytest.MonkeyPatch, initialised: bool
) -> None:
    torch, reduced = fake_torch(initialised)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", torch.distributed)
    latency = runtime.measure_interconnect_latency(iterations=5, warmup=1)
    if initialised:
        assert latency is not None
        assert latency >= 0
        assert len(reduced) == 6
    else:
        assert latency is None
        assert reduced == []


@pytest.fixture
def progress_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A controllable monotonic clock and a fresh previous-report memory."""
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    runtime._PROGRESS_CLOCK.reset()
    return now


def test_given_an_explicit_step_time_when_reporting_progress_then_one_line_carries_only_the_remaining_seconds(
    monkeypatch: pytest.MonkeyPatch, progress_clock: list[float]
) -> None:
    # Given: a Batch job's main node
    monkeypatch.setenv("AWS_BATCH_JOB_ID", "job-1#0")
    monkeypatch.setenv("AWS_BATCH_JOB_NODE_INDEX", "0")

    # When: step 250 of 1000 at 1.5 s per step
    stream = io.StringIO()
    runtime.report_progress(250, 1000, 1.5, stream=stream)

    # Then: one line, one metric, 750 steps x 1.5 s, with the namespace and dimensions of report_step_time
    (line,) = stream.getvalue().splitlines()
    document = json.loads(line)
    assert_valid_emf(document)
    directive = document["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "/aws/osprey"
    assert directive["Dimensions"] == [["Backend", "JobId", "Host"]]
    assert directive["Metrics"] == [{"Name": "RemainingSeconds", "Unit": "Seconds"}]
    assert (document["Backend"], document["JobId"], document["Host"]) == ("batch", "job-1", "0")
    assert document["RemainingSeconds"] == 750 * 1.5
    assert not {"TrainingStep", "TrainingTotalSteps", "StepTimeSeconds"} & set(document)


def test_given_no_step_time_when_reporting_progress_twice_then_the_second_line_is_the_measured_remaining_time(
    progress_clock: list[float],
) -> None:
    # Given: a first report, which has nothing to measure against
    stream = io.StringIO()
    first = runtime.report_progress(100, 1000, stream=stream)

    # Then: no step time known yet, so nothing is printed
    assert first is None
    assert stream.getvalue() == ""

    # When: 50 steps later, 100 s of wall time later
    progress_clock[0] += 100.0
    second = runtime.report_progress(150, 1000, stream=stream)

    # Then: exactly one line, RemainingSeconds = 850 steps left x 2 s per step, and nothing else
    (line,) = stream.getvalue().splitlines()
    assert json.loads(line) == second
    assert second is not None
    assert_valid_emf(second)
    assert [m["Name"] for m in second["_aws"]["CloudWatchMetrics"][0]["Metrics"]] == ["RemainingSeconds"]
    assert second["RemainingSeconds"] == 850 * 2.0


def test_given_a_restart_or_overshoot_when_reporting_progress_then_the_last_step_time_serves_never_below_0(
    progress_clock: list[float],
) -> None:
    # Given: a measured 2 s per step
    runtime.report_progress(100, 1000, stream=io.StringIO())
    progress_clock[0] += 100.0
    runtime.report_progress(150, 1000, stream=io.StringIO())

    # When: a restart from a checkpoint (the step went back), then 10 steps in 10 s
    progress_clock[0] += 30.0
    restarted = runtime.report_progress(120, 1000, stream=io.StringIO())
    progress_clock[0] += 10.0
    advanced = runtime.report_progress(130, 1000, stream=io.StringIO())

    # Then: the restart still reports with the last step time known, the next call measures afresh
    assert restarted is not None
    assert restarted["RemainingSeconds"] == 880 * 2.0
    assert advanced is not None
    assert advanced["RemainingSeconds"] == 870 * 1.0
    # And: a loop past its total reports nothing left, not a negative time
    overshoot = runtime.report_progress(1200, 1000, 1.0, stream=io.StringIO())
    assert overshoot is not None
    assert overshoot["RemainingSeconds"] == 0.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1, 10), "step must be >= 0"),
        ((1, 0), "total_steps must be > 0"),
        ((float("nan"), 10), "step must be a finite number"),
        ((1, float("inf")), "total_steps must be a finite number"),
        ((1, 10, -0.5), "step_time_s must be >= 0"),
        ((1, 10, float("nan")), "step_time_s must be a finite number"),
        ((True, 10), "step must be a finite number"),
        (("3", 10), "step must be a finite number"),
    ],
)
def test_given_bad_arguments_when_reporting_progress_then_value_error_names_the_argument(
    args: tuple[Any, ...], message: str, progress_clock: list[float]
) -> None:
    stream = io.StringIO()
    with pytest.raises(ValueError, match=message):
        runtime.report_progress(*args, stream=stream)
    assert stream.getvalue() == ""


def test_given_an_expected_runtime_in_the_environment_when_reading_config_then_it_is_in_the_block() -> None:
    block = runtime.config(
        {"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "p", "OSPREY_EXPECTED_RUNTIME": "7200"}
    )
    assert block is not None
    assert block.expected_runtime == 7200


@pytest.mark.parametrize(
    ("environment", "lead"),
    [
        ({"RANK": "0", "AWS_BATCH_JOB_ID": "j", "AWS_BATCH_JOB_NODE_INDEX": "3"}, True),
        ({"RANK": "5"}, False),
        ({"AWS_BATCH_JOB_ID": "j#1", "AWS_BATCH_JOB_NODE_INDEX": "1"}, False),
        ({"AWS_BATCH_JOB_ID": "j"}, True),
        ({"RANK": "5", "OSPREY_LEAD": "true"}, True),
        ({"OSPREY_LEAD": "0"}, False),
        ({}, True),
    ],
)
def test_given_a_process_when_asking_whether_it_leads_then_rank_zero_or_the_lead_host_does(
    environment: dict[str, str], lead: bool
) -> None:
    assert runtime.is_lead(environment, resource_config=NO_FILE) is lead


def test_given_sagemaker_hosts_when_asking_whether_it_leads_then_the_first_host_does(tmp_path: Path) -> None:
    config = tmp_path / "resourceconfig.json"
    config.write_text(json.dumps({"current_host": "algo-2", "hosts": ["algo-2", "algo-1"]}))
    assert runtime.is_lead({}, resource_config=config) is False
    config.write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-2", "algo-1"]}))
    assert runtime.is_lead({}, resource_config=config) is True


def test_given_a_non_lead_rank_when_reporting_everything_then_nothing_is_printed(
    monkeypatch: pytest.MonkeyPatch, progress_clock: list[float]
) -> None:
    # Given rank 3 of a Batch job on node 1: its progress, step time and collective latency are the lead's
    monkeypatch.setenv("AWS_BATCH_JOB_ID", "job-1#1")
    monkeypatch.setenv("AWS_BATCH_JOB_NODE_INDEX", "1")
    monkeypatch.setenv("RANK", "3")
    stream = io.StringIO()
    # When it reports all three
    document = runtime.report_progress(10, 100, 1.0, stream=stream)
    runtime.report_step_time(1.0, stream=stream)
    latency = runtime.report_interconnect_latency(80.0, stream=stream)
    # Then no line at all: no custom metric for this host
    assert stream.getvalue() == ""
    assert document is not None
    assert document["RemainingSeconds"] == 90.0  # still built and validated
    assert latency["Host"] == "1"


def test_given_the_lead_rank_when_reporting_everything_then_exactly_one_series_per_metric_on_the_lead_host(
    monkeypatch: pytest.MonkeyPatch, progress_clock: list[float]
) -> None:
    # Given rank 0 of a 4-node Batch job, on node 0
    monkeypatch.setenv("AWS_BATCH_JOB_ID", "job-1#0")
    monkeypatch.setenv("AWS_BATCH_JOB_NODE_INDEX", "0")
    monkeypatch.setenv("RANK", "0")
    stream = io.StringIO()
    # When it reports latency, progress and step time twice each (two training intervals)
    for step in (10, 20):
        runtime.report_interconnect_latency(80.0, stream=stream)
        runtime.report_progress(step, 100, 1.0, stream=stream)
        runtime.report_step_time(1.0, stream=stream)
    # Then every line is one metric on the lead host, and the job has exactly three series
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 6
    series = set()
    for line in lines:
        assert_valid_emf(line)
        (metric,) = line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        series.add((metric["Name"], line["Backend"], line["JobId"], line["Host"]))
    assert series == {
        ("InterconnectLatencyMicroseconds", "batch", "job-1", "0"),
        ("RemainingSeconds", "batch", "job-1", "0"),
        ("StepTimeSeconds", "batch", "job-1", "0"),
    }


def test_the_exported_metric_names_are_the_ones_printed() -> None:
    assert runtime.REMAINING_SECONDS_METRIC == "RemainingSeconds"
    assert "REMAINING_SECONDS_METRIC" in runtime.__all__
    assert not hasattr(runtime, "TRAINING_STEP_METRIC")
    assert not hasattr(runtime, "TOTAL_STEPS_METRIC")


def test_given_per_rank_compute_times_when_reporting_node_speeds_then_the_slowest_node_is_one_line() -> None:
    # Given 4 nodes of 2 ranks; one rank of node 2 computes 5% slower than the others
    times = [1.0, 1.0, 1.0, 1.0, 1.0, 1.05, 1.0, 1.0]
    # When the lead reports them
    document = emitted(runtime.report_node_speeds, times, 2)
    # Then one valid EMF line names node 2 and its speed relative to the median rank
    assert_valid_emf(document)
    assert document["SlowestNodeIndex"] == 2
    assert document["SlowestNodeSpeed"] == pytest.approx(1 / 1.05)
    names = [m["Name"] for m in document["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    assert names == ["SlowestNodeSpeed", "SlowestNodeIndex"]


def test_given_ragged_or_bad_compute_times_when_reporting_node_speeds_then_value_error() -> None:
    with pytest.raises(ValueError, match="whole nodes of 2"):
        runtime.report_node_speeds([1.0, 1.0, 1.0], 2, stream=io.StringIO())
    with pytest.raises(ValueError, match="positive"):
        runtime.report_node_speeds([1.0, 0.0], 2, stream=io.StringIO())


def test_given_a_real_process_group_when_gathering_compute_times_then_every_rank_value_comes_back(
    tmp_path: Path,
) -> None:
    # Given a real single-rank gloo process group (torch is installed for examples/train.py)
    dist = pytest.importorskip("torch.distributed")
    assert runtime.gather_compute_times(0.5) is None  # no process group yet
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        # When the rank gathers its compute time, then the list has one value per rank, in rank order
        assert runtime.gather_compute_times(0.5) == [0.5]
    finally:
        dist.destroy_process_group()
