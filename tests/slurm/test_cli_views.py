"""Given a Slurm job in the registry (as the bridge's discovery records it), when a user runs ``osprey jobs``
and ``osprey explain``, then the job is listed with its cluster and can be explained by its key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.backends.slurm import SlurmObservation
from osprey_control.contract import parse_block
from osprey_control.registry import JobStatus, NodeKind, NodeRef
from osprey_control.registry.dynamodb import JobRegistry

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[JobRegistry]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        registry = JobRegistry("osprey-jobs", boto3.client("dynamodb", region_name="us-east-1"), shards=16)
        registry.create_table()
        observation = SlurmObservation(
            cluster="training",
            job_id=42,
            name="llama-pretrain",
            block=parse_block({"priority_derivation_profile": "training-policy"}),
            status=JobStatus.RUNNING,
            status_time=NOW,
            submitted_at=NOW,
            nodes=(NodeRef(node_id="gpu-dy-p4d-1", kind=NodeKind.INSTANCE, instance_id="i-0abc", gpus=8),),
            requested_gpus=8,
            declared_runtime_s=3600,
        )
        registry.apply_observation(observation.to_observation())
        yield registry


def test_jobs_and_explain_show_a_slurm_job(registry: JobRegistry) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["jobs", "--table", "osprey-jobs", "--json"])
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.stdout)
    assert row["name"] == "llama-pretrain"
    assert row["backend"] == "slurm"
    assert row["queue"] == "training"
    explained = runner.invoke(app, ["explain", "slurm#training/42", "--table", "osprey-jobs"])
    assert explained.exit_code == 0, explained.output
    assert "slurm#training/42" in explained.stdout
    assert "training-policy" in explained.stdout
