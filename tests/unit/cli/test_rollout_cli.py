"""Given a deployment (moto: /osprey/config, its policies in SSM, a registry with jobs under training-policy),
when a user tries a new policy with `osprey policy replay --as` and previews a change with `apply --dry-run`
or `diff`, then the replay runs on the named policy's jobs and the preview shows the diff and the warnings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from moto import mock_aws
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.contract import parse_block
from osprey_control.policy import load_policy_files
from osprey_control.policy.stored import policy_parameter_value
from osprey_control.registry import Backend, JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from tests.conftest import REPO_ROOT

REGION = "us-east-1"
TRAINING = REPO_ROOT / "policies" / "training-policy.yaml"
runner = CliRunner()


@pytest.fixture
def deployment(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_ENDPOINT_URL", "OSPREY_TABLE_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        ssm = boto3.client("ssm", region_name=REGION)
        config = {
            "tableName": "osprey-jobs",
            "registryShards": 2,
            "region": REGION,
            "account": "123456789012",
        }
        ssm.put_parameter(Name="/osprey/config", Type="String", Value=json.dumps(config))
        policy = load_policy_files([TRAINING]).policies[0].policy
        ssm.put_parameter(
            Name="/osprey/policies/training-policy", Type="String", Value=policy_parameter_value(policy)
        )
        registry = JobRegistry("osprey-jobs", boto3.client("dynamodb", region_name=REGION), shards=2)
        registry.create_table()
        for name in ("llama-pretrain", "etl-nightly"):
            registry.apply_observation(
                JobObservation(
                    backend=Backend.BATCH,
                    native_id=f"id-{name}",
                    name=name,
                    block=parse_block({"priority_derivation_profile": "training-policy"}),
                    status=JobStatus.RUNNING,
                    event_time=datetime(2026, 12, 1, tzinfo=UTC),
                )
            )
        yield ssm


def _policy(directory: Path, name: str = "training-policy", **spec: Any) -> Path:
    document = yaml.safe_load(TRAINING.read_text())
    document["metadata"]["name"] = name
    document["spec"].update(spec)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_replay_as_tries_a_new_policy_on_an_existing_policys_jobs(deployment: Any, tmp_path: Path) -> None:
    # Given a new policy whose name no job runs
    new = _policy(tmp_path, "gpu-first", maxPriorityChange=100)

    # When replayed alone: nothing to replay, exit 1, and the way out named
    alone = runner.invoke(app, ["policy", "replay", str(new)])
    assert alone.exit_code == 1, alone.output
    assert alone.stderr.strip().splitlines() == [
        "error: nothing to replay: no active job runs 'gpu-first'; replay it against another policy's jobs with "
        "--as NAME (in use: training-policy)"
    ]

    # When replayed --as training-policy: every job of that policy is replayed under the new one
    replayed = runner.invoke(app, ["policy", "replay", str(new), "--as", "training-policy", "--json"])
    assert replayed.exit_code == 0, replayed.output
    jobs = json.loads(replayed.stdout)["gpu-first"]
    assert {job["name"] for job in jobs} == {"llama-pretrain", "etl-nightly"}
    assert {job["policy"] for job in jobs} == {"training-policy"}
    table = runner.invoke(app, ["policy", "replay", str(new), "--as", "training-policy"])
    assert table.exit_code == 0, table.output
    assert "gpu-first: 2 jobs of training-policy" in table.stdout

    # When NAME is a near miss: one line with "did you mean", exit 1
    missed = runner.invoke(app, ["policy", "replay", str(new), "--as", "trainin-policy"])
    assert missed.exit_code == 1
    assert "did you mean 'training-policy'?" in missed.stderr


def test_apply_dry_run_shows_the_diff_and_the_warnings_and_writes_nothing(
    deployment: Any, tmp_path: Path
) -> None:
    # Given an edited training policy whose weights no longer sum to 1
    rules = yaml.safe_load(TRAINING.read_text())["spec"]["derivationRules"]
    rules[0]["weight"] = 0.9
    edited = _policy(tmp_path, deadband=6, derivationRules=rules)

    for command in (["policy", "apply", "--dry-run"], ["policy", "diff"]):
        # When previewed
        result = runner.invoke(app, [*command, str(edited)])

        # Then the YAML diff of the change is shown, and the validation warning on stderr
        assert result.exit_code == 0, result.output
        assert "training-policy: changed" in result.stdout
        assert "-  deadband: 3" in result.stdout
        assert "+  deadband: 6" in result.stdout
        assert "weights sum to 1.3, not 1" in result.stderr

    # ... and the dry run wrote nothing
    stored = deployment.get_parameter(Name="/osprey/policies/training-policy")["Parameter"]["Value"]
    assert json.loads(stored)["spec"]["deadband"] == 3
