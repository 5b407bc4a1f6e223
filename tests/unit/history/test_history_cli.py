"""Given a scheduler's record (a fixture) or a deployment's registry (moto), when a user runs
``osprey simulate --history``, then it replays the record through that scheduler's model natively and with
Osprey over seeds, and prints the usual table with the spread and what it did with running and queued jobs,
or one JSON object per scheduler with ``history``, ``seeds`` and ``spread``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobObservation, JobRegistry, JobStatus

FIXTURES = Path(__file__).parent / "fixtures"
REGION = "us-east-1"
runner = CliRunner()


def _objects(*arguments: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["simulate", "--json", *arguments])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize(
    ("name", "native"),
    [
        ("sacct.txt", "slurm"),
        ("kueue-workloads.json", "kueue"),
        ("batch-describe-jobs.json", "fairshare"),
        ("sagemaker-training-jobs.jsonl", "sagemaker-queue"),
    ],
)
def test_json_replays_the_record_through_its_scheduler_natively_and_with_osprey(
    name: str, native: str
) -> None:
    objects = _objects("--history", str(FIXTURES / name), "--seeds", "3", "--seed", "4")
    assert [o["scheduler"] for o in objects] == [native, f"{native}+osprey"]
    for o in objects:
        assert o["seeds"] == [4, 5, 6]
        history = o["history"]
        assert (history["running"], history["never_started"], history["no_gpus"]) == (1, 1, 1)
        assert o["jobs"] == history["finished"] + history["running"] + history["queued"]
        assert o["gpus"] == history["gpus"]
        assert history["gpus_from_record"]
        low, high = o["spread"]["mean_wait_s"]
        assert low - 0.001 <= o["mean_wait_s"] <= high + 0.001  # the mean lies within the seeds' spread
        assert o["completed"] + o["failed"] == o["jobs"]
    assert objects[0]["priority_changes_per_job_hour"] is None
    assert objects[1]["priority_changes_per_job_hour"] is not None


def test_the_table_shows_the_means_the_spread_and_how_jobs_were_replayed() -> None:
    result = runner.invoke(app, ["simulate", "--history", str(FIXTURES / "sacct.txt"), "--seeds", "2"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "history-slurm on 48 GPUs (10 jobs); ratios: <backend>+osprey against <backend>" in out
    rows: dict[str, str] = {}
    for line in out.splitlines():
        if line.strip():
            rows.setdefault(line.split()[0], line)  # the first table's row; the spread table's comes second
    assert "x)" in rows["slurm+osprey"]
    assert "spread over seeds 0-1 (min-max)" in out
    assert (
        "slurm record replayed through slurm: 10 jobs (7 finished, 1 still running at the record's end and run "
        "at least to it, 2 still queued with their run time drawn from the finished jobs')"
    ) in out
    assert "cluster: 48 GPUs from the record's peak concurrent GPUs" in out
    assert "not replayed: 1 never started, 1 without GPUs" in out
    sized = runner.invoke(
        app, ["simulate", "--history", str(FIXTURES / "sacct.txt"), "--seeds", "1", "--gpus", "64"]
    )
    assert "cluster: 64 GPUs from --gpus" in sized.stdout


def test_schedulers_and_plots_work_as_for_any_workload(tmp_path: Path) -> None:
    objects = _objects(
        "--history", str(FIXTURES / "kueue-workloads.json"), "--seeds", "1",
        "--schedulers", "fifo,kueue,kueue+osprey", "--plot", str(tmp_path),
    )  # fmt: skip
    assert [o["scheduler"] for o in objects] == ["fifo", "kueue", "kueue+osprey"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "history-kueue-queue.png",
        "history-kueue-utilization.png",
        "history-kueue-wait-cdf.png",
    ]


def test_the_same_record_and_seeds_give_the_same_numbers() -> None:
    arguments = ("--history", str(FIXTURES / "batch-describe-jobs.json"), "--seeds", "2")
    assert _objects(*arguments) == _objects(*arguments)


# The registry ------------------------------------------------------------------------------------------------

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


def _job(
    registry: JobRegistry, backend: Backend, name: str, gpus: int, steps: list[tuple[JobStatus, float]]
) -> None:
    """Observe ``name`` through ``steps`` (status, hours before NOW), as ingest would."""
    submitted = NOW - timedelta(hours=steps[0][1])
    for status, hours in steps:
        registry.apply_observation(
            JobObservation(
                backend=backend,
                native_id=f"gpu-a/{name}" if backend is Backend.SLURM else f"ml/{name}",
                name=name,
                block=parse_block({"priority_derivation_profile": "default-policy"}),
                status=status,
                event_time=NOW - timedelta(hours=hours),
                submitted_at=submitted,
                cluster="gpu-a",
                share_identifier="nlp" if "llama" in name else "vision",
                requested_gpus=gpus,
                declared_runtime_s=8 * 3600,
            )
        )


@pytest.fixture
def deployment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[JobRegistry]:
    """/osprey/config and its registry: Slurm jobs finished, running and pending, and two EKS jobs."""
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path / "local.json"))
    for name in ("OSPREY_TABLE_NAME", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", REGION)):  # fmt: skip
        monkeypatch.setenv(name, value)
    with mock_aws():
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name="/osprey/config",
            Type="String",
            Value=json.dumps({"stackName": "Osprey", "tableName": "osprey-jobs", "registryShards": 2}),
        )
        registry = JobRegistry("osprey-jobs", boto3.client("dynamodb", region_name=REGION), shards=2)
        registry.create_table()
        pending, running, done = JobStatus.PENDING, JobStatus.RUNNING, JobStatus.SUCCEEDED
        _job(registry, Backend.SLURM, "llama-sft", 16, [(pending, 10), (running, 9.5), (done, 4)])
        _job(registry, Backend.SLURM, "vit-sweep", 8, [(pending, 9), (running, 9), (done, 7)])
        _job(registry, Backend.SLURM, "vit-eval", 8, [(pending, 8), (running, 7), (done, 6)])
        _job(registry, Backend.SLURM, "llama-70b", 32, [(pending, 8), (running, 4)])
        _job(registry, Backend.SLURM, "llama-dpo", 16, [(pending, 1)])
        _job(registry, Backend.SLURM, "vit-cancelled", 8, [(pending, 6), (JobStatus.STOPPED, 5.5)])
        _job(registry, Backend.EKS, "vit-detr", 8, [(pending, 5), (running, 5), (done, 2)])
        _job(registry, Backend.EKS, "llama-eval", 8, [(pending, 3), (running, 2)])
        yield registry


def test_the_registry_replays_each_backend_through_its_model(deployment: JobRegistry) -> None:
    objects = _objects("--history", "registry", "--seeds", "2")
    assert [o["scheduler"] for o in objects] == ["kueue", "kueue+osprey", "slurm", "slurm+osprey"]
    slurm = objects[2]["history"]
    assert slurm["format"] == "registry"
    assert slurm["source"] == "registry osprey-jobs (slurm)"
    assert (slurm["finished"], slurm["running"], slurm["queued"], slurm["never_started"]) == (3, 1, 1, 1)
    # Peak: llama-sft (16) with vit-sweep (8) and then vit-eval (8) = 24, and llama-70b's 32 alone: 32
    assert slurm["gpus"] == 32
    eks = objects[0]["history"]
    assert (eks["finished"], eks["running"], eks["queued"]) == (1, 1, 0)


def test_the_registry_is_found_like_every_command_finds_it(deployment: JobRegistry) -> None:
    by_flag = _objects("--history", "registry", "--table", "osprey-jobs", "--shards", "2", "--seeds", "1")
    assert [o["scheduler"] for o in by_flag][:2] == ["kueue", "kueue+osprey"]
    missing = runner.invoke(app, ["simulate", "--history", "registry", "--table", "no-such-table"])
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error: Scan: Requested resource not found; check --table")
    assert "Traceback" not in missing.output


def test_an_empty_registry_exits_1_saying_so(deployment: JobRegistry) -> None:
    empty = JobRegistry("empty-jobs", deployment.client, shards=1)
    empty.create_table()
    result = runner.invoke(app, ["simulate", "--history", "registry", "--table", "empty-jobs"])
    assert result.exit_code == 1
    assert (
        result.stderr.strip()
        == "error: --history: registry empty-jobs: nothing to replay: the registry holds no jobs"
    )
