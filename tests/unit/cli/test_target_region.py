"""Given where a user sets the AWS region (flag, AWS_REGION, AWS_DEFAULT_REGION, a profile) and whether an
`osprey local` runs, when a registry command resolves its control plane, then it uses the region in the AWS CLI
v2's documented order, and with nothing to talk to it says so (not "no region"), exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.cli.target import resolve_target
from osprey_control.registry.dynamodb import JobRegistry

runner = CliRunner()
CONFIG = {"stackName": "Osprey", "tableName": "osprey-jobs", "registryShards": 4}


@pytest.fixture(autouse=True)
def aws_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fake credentials, no region anywhere, a config file with a profile `ireland` in eu-west-1."""
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "OSPREY_TABLE_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    config = tmp_path / "aws-config"
    config.write_text("[profile ireland]\nregion = eu-west-1\n[default]\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    state = tmp_path / "local.json"
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(state))
    return state


@pytest.fixture
def deployments() -> Iterator[None]:
    """An Osprey deployment in each of three regions, each /osprey/config naming its own table."""
    with mock_aws():
        for region in ("eu-west-1", "us-west-2", "ap-south-1"):
            boto3.client("ssm", region_name=region).put_parameter(
                Name="/osprey/config",
                Type="String",
                Value=json.dumps({**CONFIG, "tableName": f"jobs-{region}"}),
            )
        yield


def _table() -> str:
    return resolve_target().table_name


def test_aws_region_wins_over_the_profile_region(deployments: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a profile in eu-west-1 and AWS_REGION=us-west-2
    monkeypatch.setenv("AWS_PROFILE", "ireland")
    assert _table() == "jobs-eu-west-1"  # the profile alone
    monkeypatch.setenv("AWS_REGION", "us-west-2")

    # When the control plane is resolved, Then AWS_REGION's deployment is the one read
    target = resolve_target()
    assert (target.table_name, target.region) == ("jobs-us-west-2", "us-west-2")
    assert target.client("dynamodb").meta.region_name == "us-west-2"


def test_the_documented_order_flag_aws_region_aws_default_region_profile(
    deployments: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "ireland")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    # AWS_DEFAULT_REGION beats the profile ...
    assert _table() == "jobs-ap-south-1"
    # ... AWS_REGION beats AWS_DEFAULT_REGION ...
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    assert _table() == "jobs-us-west-2"
    # ... and --region beats them all
    assert resolve_target(region="eu-west-1").table_name == "jobs-eu-west-1"
    # An empty AWS_REGION is not a region: the next in line is used
    monkeypatch.setenv("AWS_REGION", "")
    assert _table() == "jobs-ap-south-1"


def test_jobs_with_aws_region_reads_that_regions_table(
    deployments: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given only AWS_REGION (no AWS_DEFAULT_REGION, which is all this boto3 reads)
    monkeypatch.setenv("AWS_REGION", "us-west-2")

    JobRegistry("jobs-us-west-2", boto3.client("dynamodb", region_name="us-west-2"), shards=4).create_table()

    # When the user lists jobs, Then it reads the us-west-2 deployment's (empty) table
    result = runner.invoke(app, ["jobs", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


REGISTRY_COMMANDS = [
    ["jobs"],
    ["explain", "llama"],
    ["history", "llama"],
    ["policy", "diff", "policies/training-policy.yaml"],
    ["policy", "apply", "--dry-run", "policies/training-policy.yaml"],
    ["policy", "replay", "policies/training-policy.yaml"],
    ["policy", "validate", "--deployment", "policies/training-policy.yaml"],
]


def _stopped_local(state: Path) -> None:
    """`osprey local up` then `osprey local down`: a real process stands in for the server and is stopped."""
    server = subprocess.Popen(["sleep", "60"])
    threading.Thread(target=server.wait, daemon=True).start()  # reap it when `down` ends it
    state.write_text(
        json.dumps(
            {
                "endpoint": "http://localhost:4599",
                "pid": server.pid,
                "state_machine_arn": "arn:aws:states:us-east-1:123456789012:stateMachine:local-cycle",
                "table_name": "Osprey-local-table",
                "shards": 16,
                "functions": {},
                "jobs": [],
            }
        )
    )
    down = runner.invoke(app, ["local", "down"])
    assert down.exit_code == 0, down.output
    assert not state.exists()
    server.wait(timeout=10)


@pytest.mark.parametrize("arguments", REGISTRY_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_after_local_down_every_registry_command_says_no_control_plane_runs(
    arguments: list[str], aws_env: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a local that was up and is now down, and no region configured anywhere
    _stopped_local(aws_env)
    monkeypatch.chdir(repo_root)

    # When a registry command runs
    result = runner.invoke(app, arguments)

    # Then one line says no control plane runs and how to start or name one; exit 1
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: no Osprey control plane to talk to: no osprey local is running"), (
        lines
    )
    assert "`osprey local up --detach`" in lines[-1]
    assert "--region/--profile or AWS_REGION" in lines[-1]
    assert "no AWS region" not in result.stderr


def test_a_stale_state_file_is_named(aws_env: Path) -> None:
    # Given the state file of a server that died without `down`
    aws_env.write_text(
        json.dumps(
            {"endpoint": "http://localhost:4599", "pid": 2**22 + 4321, "state_machine_arn": "arn",
             "table_name": "t", "shards": 16, "functions": {}, "jobs": []}
        )
    )  # fmt: skip
    assert not os.path.exists(f"/proc/{2**22 + 4321}")

    result = runner.invoke(app, ["jobs"])

    assert result.exit_code == 1
    assert f"pid {2**22 + 4321}, has stopped" in result.stderr
