"""Given a deployment's registry (moto) holding jobs on several backends and policies, some derived by the real
engine with a metric missing, when a user runs `osprey jobs` and `osprey explain`, then they can filter, see
ages in kubectl's units, the wide columns, a watch that redraws, each rule's effective weight and the rules
that had no data, and a "did you mean" for a mistyped name."""

from __future__ import annotations

import json
import re
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
from osprey_control.derivation import JobMetrics, NodeMetrics, derive, summarize_inputs
from osprey_control.policy import load_policies
from osprey_control.registry import Backend, JobKey, JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from tests.conftest import REPO_ROOT
from tests.sdk.conftest import REGION

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path / "local.json"))
    monkeypatch.delenv("OSPREY_TABLE_NAME", raising=False)


def _register(
    registry: JobRegistry,
    backend: Backend,
    name: str,
    *,
    policy: str,
    status: JobStatus,
    age: timedelta,
    now: datetime,
) -> JobKey:
    observation = JobObservation(
        backend=backend,
        native_id=f"ml/{name}" if backend is Backend.EKS else f"id-{name}",
        name=name,
        block=parse_block({"priority_derivation_profile": policy}),
        status=status,
        event_time=now - age / 2,
        submitted_at=now - age,
        cluster="gpu-cluster" if backend is Backend.EKS else None,
        requested_gpus=8,
    )
    registry.apply_observation(observation)
    return observation.key


@pytest.fixture
def registry() -> Iterator[JobRegistry]:
    """/osprey/config and a registry: llama (batch, 3 h, all metrics), vit (eks, 20 min, no memory bandwidth:
    that rule has no data), etl (batch, aging-policy, pending 45 s, never derived)."""
    now = datetime.now(UTC)  # when the test runs, not when the module was imported: ages are asserted
    with mock_aws():
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name="/osprey/config",
            Type="String",
            Value=json.dumps({"stackName": "Osprey", "tableName": "osprey-jobs", "registryShards": 2}),
        )
        registry = JobRegistry("osprey-jobs", boto3.client("dynamodb", region_name=REGION), shards=2)
        registry.create_table()
        policy = next(p for p in load_policies([REPO_ROOT / "policies"]) if p.name == "training-policy")
        loads = {
            "llama-pretrain": (Backend.BATCH, timedelta(hours=3), {"gpu_utilization": 95.0,
                               "memory_bandwidth_utilization": 70.0, "node_interconnect_latency": 120.0}),
            "vit-finetune": (Backend.EKS, timedelta(minutes=20), {"gpu_utilization": 60.0,
                             "node_interconnect_latency": 200.0}),
        }  # fmt: skip
        for name, (backend, age, values) in loads.items():
            key = _register(
                registry, backend, name, policy="training-policy", status=JobStatus.RUNNING, age=age, now=now
            )
            decision = derive(policy, JobMetrics(name, (NodeMetrics("node-1", values),)), previous=50)
            record = registry.get(key)
            assert record is not None
            registry.record_decision(key, decision.to_dict(), decision.priority, record.version, now)
        _register(
            registry,
            Backend.BATCH,
            "etl-nightly",
            policy="aging-policy",
            status=JobStatus.PENDING,
            age=timedelta(seconds=45),
            now=now,
        )
        yield registry


def _rows(*arguments: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["jobs", "--json", *arguments])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def test_jobs_finds_the_deployment_and_filters_by_backend_policy_and_status(registry: JobRegistry) -> None:
    # When the user lists every job, then by backend, policy and status (repeatable, case-insensitive)
    assert [row["name"] for row in _rows()] == ["llama-pretrain", "vit-finetune", "etl-nightly"]
    assert [row["name"] for row in _rows("--backend", "eks")] == ["vit-finetune"]
    assert [row["name"] for row in _rows("--policy", "aging-policy")] == ["etl-nightly"]
    assert [
        row["name"] for row in _rows("--status", "pending", "--status", "RUNNING", "--backend", "batch")
    ] == [
        "llama-pretrain",
        "etl-nightly",
    ]
    # ... and a value that is not allowed names the option and what is
    bad = runner.invoke(app, ["jobs", "--backend", "ecs"])
    assert bad.exit_code == 2
    assert (
        "Invalid value for --backend: 'ecs' is not one of sagemaker, sagemaker-queued, batch, eks"
        in bad.stderr
    )


def test_jobs_show_age_and_changes_in_human_units_and_wide_adds_columns(registry: JobRegistry) -> None:
    rows = {row["name"]: row for row in _rows()}
    assert rows["llama-pretrain"]["age_seconds"] == pytest.approx(3 * 3600, abs=60)
    assert rows["etl-nightly"]["submitted_at"] is not None

    # When the user lists the jobs as a table
    table = runner.invoke(app, ["jobs"]).stdout
    llama = next(line for line in table.splitlines() if "llama-pretrain" in line)
    etl = next(line for line in table.splitlines() if "etl-nightly" in line)

    # Then AGE and CHANGED read like kubectl's, and the title says which control plane answered
    assert "AGE" in table
    assert "CHANGED" in table
    assert " 3h " in llama
    assert "s ago" in llama
    assert re.search(r" \d{2,3}s ", etl), etl  # 45 s old when registered: seconds, not a date
    assert "3 active job(s) · Osprey in us-east-1 (/osprey/config)" in table
    # ... and -o wide adds the key, target, GPUs and the queue or cluster
    wide = runner.invoke(app, ["jobs", "-o", "wide"]).stdout
    for header in ("KEY", "TARGET", "APPLIED AT", "GPUS", "QUEUE/CLUSTER", "CO-SCHEDULE"):
        assert header in wide
    vit = next(line for line in wide.splitlines() if "vit-finetune" in line)
    assert "eks#ml/vit-finetune" in vit
    assert "gpu-cluster" in vit


def test_watch_redraws_until_its_count(registry: JobRegistry) -> None:
    # When the user watches with a limit of three redraws
    result = runner.invoke(app, ["jobs", "--watch", "--interval", "0.1", "--count", "3", "--backend", "eks"])

    # Then three frames were drawn, each with its time and the current rows
    assert result.exit_code == 0, result.output
    assert result.stdout.count("every 0.1s · ") == 3
    assert result.stdout.count("vit-finetune") == 3


def test_explain_shows_effective_weights_and_the_rule_without_data(registry: JobRegistry) -> None:
    # When the user explains the EKS job, whose memory bandwidth had no data
    result = runner.invoke(app, ["explain", "vit-finetune"])
    as_json = json.loads(runner.invoke(app, ["explain", "vit-finetune", "--json"]).stdout)

    # Then the dropped rule is named, and the others' weights are renormalised: 0.6 and 0.1 of 0.7
    assert result.exit_code == 0, result.output
    assert "EFFECTIVE" in result.stdout
    assert (
        "no data: rule 1 (memory_bandwidth_utilization, weight 0.300) dropped; the other weights (sum 0.700) "
        "were renormalised to 1 (EFFECTIVE column)"
    ) in result.stdout
    gpu = next(line for line in result.stdout.splitlines() if "gpu_utilization" in line)
    assert "0.600       0.857   used" in gpu
    assert as_json["dropped_rules"] == [1]
    assert [rule["effective_weight"] for rule in as_json["decision"]["rules"]] == pytest.approx(
        [6 / 7, 0.0, 1 / 7]
    )
    # ... while a job with every metric keeps its weights and has no such line
    llama = runner.invoke(app, ["explain", "llama-pretrain"]).stdout
    assert "no data" not in llama
    assert "0.300       0.300   used" in llama


def test_explain_suggests_the_job_the_user_meant(registry: JobRegistry) -> None:
    result = runner.invoke(app, ["explain", "vit-finetuen"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "error: no job 'vit-finetuen' in the registry; did you mean 'vit-finetune'? (3 active job(s): "
        "`osprey jobs` lists them; a finished job needs BACKEND#ID). A job is tracked only once it opts in with "
        "exactly osprey:enabled=true (osprey.aws/enabled=true on EKS); True, TRUE or 1 do not opt in, and the "
        "ingest log's 'invalid contract' warning names the value it saw"
    ]
    never_derived = runner.invoke(app, ["explain", "etl-nightly"])
    assert "no decision yet: the job has not been through a cycle" in never_derived.stdout


def test_explain_and_history_say_why_a_job_was_held_for_a_reservation(registry: JobRegistry) -> None:
    # Given a decision made while the job was held back for another job's reservation
    key = next(record.key for record in registry.list_active() if record.name == "etl-nightly")
    policy = next(p for p in load_policies([REPO_ROOT / "policies"]) if p.name == "default-policy")
    note = "held for batch#llama-pretrain: it would end after that job's predicted start (in 42 min)"
    metrics = JobMetrics("etl-nightly", (), {"reservation": 0.0}, notes={"reservation": note})
    decision = derive(policy, metrics, previous=50)
    record = registry.get(key)
    assert record is not None
    registry.record_decision(
        key,
        {**decision.to_dict(), "inputs": summarize_inputs(metrics)},
        decision.priority,
        record.version,
        datetime.now(UTC),
    )
    # When the user explains the job and reads its history, then both name the reservation and its predicted start
    explained = runner.invoke(app, ["explain", "etl-nightly"], terminal_width=200)
    assert explained.exit_code == 0, explained.output
    assert f"reservation: {note}" in explained.stdout
    history = runner.invoke(app, ["history", "etl-nightly", "--json"])
    assert history.exit_code == 0, history.output
    assert "in 42 min" in history.stdout
