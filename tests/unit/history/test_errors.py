"""Given a record missing what the replay needs, when it is read, then the error names the file, the job (line
or item) and the missing column or field, and ``osprey simulate --history`` exits 1 with it; a record with
nothing to replay exits 1 saying why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.simulate.history import HistoryError, read_history

FIXTURES = Path(__file__).parent / "fixtures"
runner = CliRunner()


def _error(path: Path) -> str:
    with pytest.raises(HistoryError) as caught:
        read_history(path)
    return str(caught.value)


@pytest.mark.parametrize(
    "column", ["Submit", "Start", "End", "Timelimit", "NNodes", "AllocTRES", "ReqTRES", "State"]
)
def test_sacct_without_a_column_names_it_and_the_command_that_has_it(column: str, tmp_path: Path) -> None:
    lines = (FIXTURES / "sacct.txt").read_text().splitlines()
    drop = lines[0].split("|").index(column)
    path = tmp_path / "sacct.txt"
    path.write_text(
        "\n".join("|".join(c for i, c in enumerate(line.split("|")) if i != drop) for line in lines)
    )
    message = _error(path)
    assert f"lacks column(s) {column}" in message
    assert "sacct -a -P -X --format=JobIDRaw,JobName,User,Account" in message


def test_sacct_with_jobid_instead_of_jobidraw_asks_for_jobidraw(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text((FIXTURES / "sacct.txt").read_text().replace("JobIDRaw", "JobID", 1))
    assert "lacks column(s) JobIDRaw" in _error(path)


def test_sacct_bad_values_name_the_line_and_column(tmp_path: Path) -> None:
    text = (FIXTURES / "sacct.txt").read_text()
    path = tmp_path / "sacct.txt"
    path.write_text(text.replace("|04:00:00|1|billing=24", "|four hours|1|billing=24", 1))
    assert _error(path).startswith(f"{path}: line 3: Timelimit: 'four hours' is not [D-]HH:MM:SS")
    path.write_text(text.replace("2026-11-30T08:05:30", "yesterday", 1))
    assert f"{path}: line 3: Submit: 'yesterday' is not a time" in _error(path)


def _kueue(change: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / "kueue-workloads.json").read_text())
    change(document["items"][1])
    return document


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda item: item["metadata"].pop("creationTimestamp"),
            "items[1]: missing field metadata.creationTimestamp",
        ),
        (lambda item: item["spec"].pop("podSets"), "items[1]: missing field spec.podSets"),
        (
            lambda item: item["spec"]["podSets"][0].pop("count"),
            "items[1]: spec.podSets[0]: missing field count",
        ),
        (
            lambda item: item["spec"]["podSets"][0]["template"]["spec"].pop("containers"),
            "items[1]: spec.podSets[0].template.spec.containers: missing field",
        ),
        (
            lambda item: item["status"]["conditions"][1].pop("lastTransitionTime"),
            "items[1] Admitted: missing field lastTransitionTime",
        ),
    ],
)
def test_kueue_without_a_field_names_the_item_and_field(change: Any, expected: str, tmp_path: Path) -> None:
    path = tmp_path / "workloads.json"
    path.write_text(json.dumps(_kueue(change)))
    assert _error(path) == f"{path}: {expected}"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda job: job.pop("createdAt"), "[0].jobs[1]: missing field createdAt"),
        (lambda job: job.pop("jobId"), "[0].jobs[1]: missing field jobId"),
        (
            lambda job: job.update(startedAt="2026-11-30"),
            "[0].jobs[1]: startedAt: '2026-11-30' is not epoch milliseconds",
        ),
    ],
)
def test_batch_without_a_field_names_the_page_job_and_field(
    change: Any, expected: str, tmp_path: Path
) -> None:
    pages = json.loads((FIXTURES / "batch-describe-jobs.json").read_text())
    change(pages[0]["jobs"][1])
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(pages))
    assert _error(path) == f"{path}: {expected}"


def test_batch_multi_node_without_its_node_count_names_it(tmp_path: Path) -> None:
    pages = json.loads((FIXTURES / "batch-describe-jobs.json").read_text())
    pages[0]["jobs"][0]["nodeProperties"].pop("numNodes")
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(pages))
    assert _error(path) == f"{path}: [0].jobs[0].nodeProperties: missing field numNodes"


@pytest.mark.parametrize("field", ["CreationTime", "ResourceConfig", "ResourceConfig.InstanceType"])
def test_sagemaker_without_a_field_names_the_job_and_field(field: str, tmp_path: Path) -> None:
    jobs = [
        json.loads(line) for line in (FIXTURES / "sagemaker-training-jobs.jsonl").read_text().splitlines()
    ]
    parent, _, leaf = field.rpartition(".")
    (jobs[1][parent] if parent else jobs[1]).pop(leaf)
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs))
    message = _error(path)
    assert message.startswith(f"{path}: [1] {jobs[1]['TrainingJobName']}")
    assert message.endswith(f"missing field {leaf}")


def test_an_unknown_record_exits_1_naming_what_is_read(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,submit_time_s,num_gpus,duration_s\na,0,8,3600\n")
    result = runner.invoke(app, ["simulate", "--history", str(path)])
    assert result.exit_code == 1
    assert (
        f"error: --history: {path}: not a record this command reads; expected sacct -P output"
        in result.stderr
    )
    missing = runner.invoke(app, ["simulate", "--history", str(tmp_path / "absent.txt")])
    assert missing.exit_code == 2  # a missing input file is a usage error (docs/cli.md)
    assert f"cannot read {tmp_path / 'absent.txt'}" in missing.stderr


def test_a_missing_column_exits_1_with_the_error(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text((FIXTURES / "sacct.txt").read_text().replace("|Submit|", "|Submitted|", 1))
    result = runner.invoke(app, ["simulate", "--history", str(path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: --history: {path}: sacct output lacks column(s) Submit;")


def test_a_record_with_nothing_to_replay_exits_1_saying_why(tmp_path: Path) -> None:
    lines = (FIXTURES / "sacct.txt").read_text().splitlines()
    path = tmp_path / "sacct.txt"
    # Only the CPU job and the job cancelled before it started
    path.write_text("\n".join([lines[0], lines[3], lines[5]]) + "\n")
    result = runner.invoke(app, ["simulate", "--history", str(path)])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: --history: {path}: nothing to replay: 2 job(s), 1 without GPUs, 1 never started, "
        "0 queued with no run time to estimate from"
    )
    assert result.stdout == ""


def test_history_and_workload_together_and_seeds_without_history_are_usage_errors() -> None:
    both = runner.invoke(app, ["simulate", "--history", str(FIXTURES / "sacct.txt"), "--workload", "seed"])
    assert both.exit_code == 2
    assert "--history: replays a record instead of --workload" in both.stderr
    seeds = runner.invoke(app, ["simulate", "--workload", "seed", "--seeds", "3"])
    assert seeds.exit_code == 2
    assert "--seeds: only with --history" in seeds.stderr
    zero = runner.invoke(app, ["simulate", "--history", str(FIXTURES / "sacct.txt"), "--seeds", "0"])
    assert zero.exit_code == 2
    assert "--seeds: must be between 1 and 100, got 0" in zero.stderr


def test_a_cluster_too_small_for_a_recorded_gang_names_gpus() -> None:
    result = runner.invoke(app, ["simulate", "--history", str(FIXTURES / "sacct.txt"), "--gpus", "16"])
    assert result.exit_code == 1
    assert (
        "error: --gpus: job 40117: 32 GPUs is not a whole number of 8-GPU nodes this cluster has (2)"
        in result.stderr
    )
