"""Given a metrics file for `osprey derive`, when it is read, then values are averaged per node, unknown keys
ignored, and bad values rejected with their path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from osprey_control.derivation import MetricsFileError, parse_metrics_document, read_metrics_file


def test_per_gpu_lists_are_averaged_and_unknown_keys_ignored() -> None:
    job = parse_metrics_document(
        {
            "job": {"id": "j1", "queue_wait": 30, "owner": "team-a"},
            "nodes": [
                {"node_id": "i-1", "gpu_utilization": [90, 100, 80, 70], "temperature": 71},
                {"gpu_utilization": 55, "memory_bandwidth_utilization": []},
            ],
            "extra": True,
        }
    )
    assert job.job_id == "j1"
    assert job.job_values == {"queue_wait": 30.0}
    assert [node.node_id for node in job.nodes] == ["i-1", "node-1"]
    assert job.nodes[0].values == {"gpu_utilization": 85.0}
    assert job.nodes[1].values == {"gpu_utilization": 55.0}  # an empty per-GPU list is no data


def test_job_level_signals_are_read_from_job() -> None:
    # Given a queued job: every job-level signal in `job`, no nodes yet
    job = parse_metrics_document(
        {
            "job": {
                "id": "queued-1",
                "queue_wait": 600,
                "attained_service": 12.5,
                "remaining_time": 7200,
                "requested_gpus": 64,
            },
            "nodes": [],
        }
    )
    # When it is read, Then each is a job value (a float), and there are no nodes
    assert job.job_values == {
        "queue_wait": 600.0,
        "attained_service": 12.5,
        "remaining_time": 7200.0,
        "requested_gpus": 64.0,
    }
    assert all(isinstance(value, float) for value in job.job_values.values())
    assert job.nodes == ()


def test_job_level_signals_on_a_node_and_null_signals_are_ignored() -> None:
    # A job-level signal belongs in `job`: on a node it is an unknown key; null in `job` is no data
    job = parse_metrics_document(
        {
            "job": {"id": "j1", "remaining_time": None, "requested_gpus": 8},
            "nodes": [{"node_id": "i-1", "gpu_utilization": 50, "attained_service": 3, "remaining_time": 9}],
        }
    )
    assert job.job_values == {"requested_gpus": 8.0}
    assert job.nodes[0].values == {"gpu_utilization": 50.0}


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"nodes": [{"gpu_utilization": "95"}]}, "nodes[0].gpu_utilization"),
        ({"nodes": [{}, {"node_interconnect_latency": True}]}, "nodes[1].node_interconnect_latency"),
        ({"nodes": [{"gpu_utilization": [90, "x"]}]}, "nodes[0].gpu_utilization[1]"),
        ({"nodes": [{"gpu_utilization": float("inf")}]}, "nodes[0].gpu_utilization"),
        ({"job": {"queue_wait": "long"}}, "job.queue_wait"),
        ({"job": {"remaining_time": "2h"}}, "job.remaining_time"),
        ({"job": {"attained_service": [1, 2]}}, "job.attained_service"),
        ({"job": {"requested_gpus": True}}, "job.requested_gpus"),
        ({"job": {"remaining_time": float("nan")}}, "job.remaining_time"),
        ({"job": {"attained_service": float("-inf")}}, "job.attained_service"),
        ({"job": {"requested_gpus": 10**400}}, "job.requested_gpus"),
        ({"nodes": {"gpu_utilization": 1}}, "nodes"),
        ({"nodes": [5]}, "nodes[0]"),
        ({"job": []}, "job"),
        ([], "(document)"),
    ],
)
def test_bad_values_name_their_path(document: Any, path: str) -> None:
    with pytest.raises(MetricsFileError) as raised:
        parse_metrics_document(document)
    assert raised.value.path == path


def test_json_nan_is_rejected(tmp_path: Path) -> None:
    file = tmp_path / "m.json"
    file.write_text('{"nodes": [{"gpu_utilization": NaN}]}')
    with pytest.raises(MetricsFileError, match="NaN is not a valid JSON number"):
        read_metrics_file(file)


def test_invalid_json_reports_line_and_column(tmp_path: Path) -> None:
    file = tmp_path / "m.json"
    file.write_text('{"nodes": [\n  {"gpu_utilization": }]}')
    with pytest.raises(MetricsFileError) as raised:
        read_metrics_file(file)
    assert raised.value.path == "line 2, column 23"


def test_yaml_metrics_files_are_read_by_suffix(tmp_path: Path) -> None:
    file = tmp_path / "m.yaml"
    file.write_text("job: {id: j9}\nnodes:\n- {node_id: a, gpu_utilization: [50, 70]}\n")
    assert read_metrics_file(file).nodes[0].values == {"gpu_utilization": 60.0}


def test_shipped_sample_fleet_is_valid(repo_root: Path) -> None:
    files = sorted((repo_root / "docs/examples/fleet").glob("*.json"))
    assert len(files) >= 5
    for file in files:
        job = read_metrics_file(file)
        assert job.job_id == json.loads(file.read_text())["job"]["id"]


@pytest.mark.parametrize(
    ("content", "path", "message"),
    [
        ('{"nodes": [{"gpu_utilization": 1' + "0" * 400 + "}]}", "nodes[0].gpu_utilization", "finite number"),
        ('{"nodes": [{"gpu_utilization": ' + "9" * 5000 + "}]}", "(file)", "value out of range"),
        ('{"x": ' + "[" * 100000 + "]" * 100000 + "}", "(file)", "nesting is too deep"),
        (
            '{"nodes": [{"gpu_utilization": 1, "gpu_utilization": 2}]}',
            "(file)",
            "duplicate key 'gpu_utilization'",
        ),
    ],
    ids=["huge-int", "too-many-digits", "deep-nesting", "duplicate-key"],
)
def test_hostile_json_is_refused_cleanly(tmp_path: Path, content: str, path: str, message: str) -> None:
    file = tmp_path / "m.json"
    file.write_text(content)
    with pytest.raises(MetricsFileError) as raised:
        read_metrics_file(file)
    assert raised.value.path == path
    assert message in raised.value.message


def test_control_characters_in_yaml_metrics_are_refused(tmp_path: Path) -> None:
    file = tmp_path / "m.yaml"
    file.write_text("nodes:\n- {gpu_utilization: 5}\x01\n")
    with pytest.raises(MetricsFileError, match="not valid YAML"):
        read_metrics_file(file)


def test_values_whose_sum_overflows_still_average() -> None:
    job = parse_metrics_document({"nodes": [{"gpu_utilization": [1e308, 1e308]}]})
    assert job.nodes[0].values["gpu_utilization"] == 1e308
