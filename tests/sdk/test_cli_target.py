"""Given the ways a user points the CLI at a control plane (flags, a running `osprey local`, a deployment's
/osprey/config) and the ways that setup can be missing, when a command runs, then it finds the right one,
or prints one line saying what to set and exits 1, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore import exceptions as botocore_errors
from moto import mock_aws
from typer.testing import CliRunner

from osprey.cli.errors import TargetError, describe_error
from osprey.cli.main import app
from osprey.cli.target import find_job, resolve_target, running_local
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from tests.sdk.conftest import REGION

runner = CliRunner()
CONFIG = {
    "stackName": "Osprey",
    "region": REGION,
    "account": "123456789012",
    "tableName": "osprey-prod-jobs",
    "registryShards": 4,
    "cycleStateMachineArn": f"arn:aws:states:{REGION}:123456789012:stateMachine:cycle",
    "policyPrefix": "/osprey/policies",
    "allowedRulePrefix": "osprey-rule-",
    "functions": {"derive": "Osprey-Derive"},
}


@pytest.fixture(autouse=True)
def no_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No `osprey local` unless a test writes the state file; no table from the environment."""
    path = tmp_path / "local.json"
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(path))
    for name in ("OSPREY_TABLE_NAME", "OSPREY_REGISTRY_SHARDS", "OSPREY_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.fixture
def deployment() -> Iterator[JobRegistry]:
    """A real-looking deployment: /osprey/config and its registry table with one job."""
    with mock_aws():
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name="/osprey/config", Type="String", Value=json.dumps(CONFIG)
        )
        registry = JobRegistry("osprey-prod-jobs", boto3.client("dynamodb", region_name=REGION), shards=4)
        registry.create_table()
        for name in ("llama-pretrain", "llama-finetune", "etl-nightly"):
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
        yield registry


def _fake_local(path: Path, pid: int, table: str = "Osprey-local-table") -> None:
    path.write_text(
        json.dumps(
            {
                "endpoint": "http://localhost:4599",
                "pid": pid,
                "state_machine_arn": "arn:aws:states:us-east-1:123456789012:stateMachine:local-cycle",
                "table_name": table,
                "shards": 16,
                "functions": {"derive": "local-derive"},
                "jobs": [],
            }
        )
    )


def test_a_deployment_is_read_from_osprey_config(deployment: JobRegistry) -> None:
    # Given no flags and no osprey local, when the target is resolved
    target = resolve_target()

    # Then it is the deployment /osprey/config describes, with its table, shards and settings
    assert (target.source, target.table_name, target.shards) == ("deployment", "osprey-prod-jobs", 4)
    assert target.cycle_state_machine_arn == CONFIG["cycleStateMachineArn"]
    assert (target.account, target.allowed_rule_prefix, target.functions) == (
        "123456789012",
        "osprey-rule-",
        {"derive": "Osprey-Derive"},
    )
    assert target.registry().shards == 4
    assert {record.name for record in target.registry().list_active()} == {
        "llama-pretrain",
        "llama-finetune",
        "etl-nightly",
    }


def test_flags_win_over_a_running_local_and_the_deployment(deployment: JobRegistry, no_local: Path) -> None:
    # Given a running osprey local (this process stands in for its server)
    _fake_local(no_local, os.getpid())

    # When --table names another table, Then the flag wins (and the local's endpoint is not used for it)
    flagged = resolve_target(table="other-table", shards=2)
    assert (flagged.source, flagged.table_name, flagged.shards, flagged.endpoint) == (
        "flags",
        "other-table",
        2,
        None,
    )
    # ... and --region means a real AWS: the local is skipped for /osprey/config
    assert resolve_target(region=REGION).source == "deployment"


def test_a_running_local_is_found_and_a_stale_state_file_is_ignored(
    deployment: JobRegistry, no_local: Path
) -> None:
    # Given the state file of a local whose server process is gone
    _fake_local(no_local, 2**22 + 12345)

    # Then the deployment is used
    assert resolve_target().source == "deployment"

    # Given one whose server runs (its pid alive), Then it is found (tests/local resolves a real one)
    _fake_local(no_local, os.getpid())
    state = running_local()
    assert state is not None
    assert (state.table_name, state.endpoint) == ("Osprey-local-table", "http://localhost:4599")


def test_osprey_jobs_without_credentials_prints_one_line_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given no credentials anywhere boto3 looks (environment, files; instance metadata is disabled)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))

    # When the user lists jobs, with and without --table
    for arguments in (["jobs"], ["jobs", "--table", "osprey-jobs"]):
        result = runner.invoke(app, arguments)

        # Then one line says what to set, exit 1, no traceback
        assert result.exit_code == 1, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("error: no AWS credentials found: set AWS_PROFILE")
        assert "Traceback" not in result.output


def test_no_region_and_an_unknown_profile_are_one_line_each(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)

    no_region = runner.invoke(app, ["explain", "llama", "--table", "osprey-jobs"])
    assert no_region.exit_code == 1
    assert no_region.stderr.strip().splitlines() == [
        "error: no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION), pass --region, or give your profile a "
        "region (`aws configure set region us-east-1`)"
    ]

    no_profile = runner.invoke(app, ["jobs", "--profile", "prod"])
    assert no_profile.exit_code == 1
    assert no_profile.stderr.strip().splitlines() == [
        "error: The config profile (prod) could not be found: pick one of `aws configure list-profiles` with "
        "--profile or AWS_PROFILE"
    ]


def test_no_deployment_in_the_region_says_where_it_looked(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        result = runner.invoke(app, ["jobs", "--region", "eu-west-1"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "error: cannot find the registry table: no Osprey deployment in eu-west-1 (/osprey/config not found); "
        "pass --region/--profile for the account it is in, --table, or start `osprey local up`"
    ]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            botocore_errors.EndpointConnectionError(endpoint_url="http://localhost:4599/"),
            "cannot reach http://localhost:4599/: check the network and the region (AWS_REGION), "
            "AWS_ENDPOINT_URL, or, for osprey local, that it is up (`osprey local status`)",
        ),
        (
            botocore_errors.PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY"),
            "incomplete AWS credentials (Partial credentials found in env, missing: AWS_SECRET_ACCESS_KEY): "
            "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        ),
        (
            botocore_errors.ClientError(
                {"Error": {"Code": "ExpiredTokenException", "Message": "The security token has expired"}},
                "Query",
            ),
            "your AWS credentials have expired (ExpiredTokenException); refresh them (e.g. `aws sso login`) and "
            "retry",
        ),
        (
            botocore_errors.ClientError(
                {
                    "Error": {
                        "Code": "AccessDeniedException",
                        "Message": "not authorized to perform: dynamodb:Query",
                    }
                },
                "Query",
            ),
            "AWS denied Query (AccessDeniedException): not authorized to perform: dynamodb:Query; use a profile "
            "or role allowed to call it (docs/cli.md lists what each command needs)",
        ),
    ],
)
def test_setup_errors_read_as_what_to_fix(error: Exception, expected: str) -> None:
    assert describe_error(error) == expected


def test_a_bug_is_one_line_too_and_osprey_debug_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a command that fails unexpectedly (a bug, not a setup problem)
    def broken(**_: Any) -> None:
        raise KeyError("tableName")

    monkeypatch.setattr("osprey.cli.jobs.resolve_target", broken)

    # When it runs, Then one line names it and how to see more, exit 1
    result = runner.invoke(app, ["jobs"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "error: unexpected KeyError: 'tableName' (run with OSPREY_DEBUG=1 for the traceback)"
    ]
    # ... and with OSPREY_DEBUG=1 the exception itself comes through
    monkeypatch.setenv("OSPREY_DEBUG", "1")
    debug = runner.invoke(app, ["jobs"])
    assert isinstance(debug.exception, KeyError)


def test_find_job_suggests_close_names_and_refuses_ambiguous_ones(deployment: JobRegistry) -> None:
    assert find_job(deployment, "llama-pretrain").native_id == "id-llama-pretrain"
    assert find_job(deployment, "batch#id-etl-nightly").name == "etl-nightly"
    with pytest.raises(TargetError, match=r"did you mean 'llama-pretrain' or 'llama-finetune'\?"):
        find_job(deployment, "llama-pretrian")
    with pytest.raises(TargetError, match=r"no job 'resnet' in the registry \(3 active job"):
        find_job(deployment, "resnet")


def test_a_plain_name_finds_a_discovered_job_and_names_the_clusters_when_ambiguous(
    deployment: JobRegistry,
) -> None:
    # Given ml/train running on two EKS clusters and Slurm job 42 on cluster pc (ids name cluster and uid)
    def observe(native_id: str, name: str, backend: Backend, cluster: str) -> None:
        deployment.apply_observation(
            JobObservation(
                backend=backend, native_id=native_id, name=name, cluster=cluster, status=JobStatus.RUNNING,
                block=parse_block({"priority_derivation_profile": "training-policy"}),
                event_time=datetime(2026, 12, 1, tzinfo=UTC),
            )
        )  # fmt: skip

    observe("gpu-a/ml/train/uid-1", "train", Backend.EKS, "gpu-a")
    observe("gpu-b/ml/train/uid-2", "train", Backend.EKS, "gpu-b")
    observe("pc/42@1800000000", "pretrain", Backend.SLURM, "pc")
    # When the user names a job by its plain name, Then the answer names each cluster and what to type instead
    with pytest.raises(TargetError) as ambiguous:
        find_job(deployment, "train")
    assert str(ambiguous.value) == (
        "'train' matches several jobs: gpu-a/ml/train (cluster gpu-a, eks#gpu-a/ml/train/uid-1); "
        "gpu-b/ml/train (cluster gpu-b, eks#gpu-b/ml/train/uid-2); name one of them"
    )
    # And each of those, the Slurm job's name, cluster/job id and key find exactly one job
    assert find_job(deployment, "gpu-b/ml/train").native_id == "gpu-b/ml/train/uid-2"
    assert find_job(deployment, "pretrain").native_id == "pc/42@1800000000"
    assert find_job(deployment, "pc/42").native_id == "pc/42@1800000000"
    assert find_job(deployment, "slurm#pc/42").native_id == "pc/42@1800000000"  # the key of the old format
    assert find_job(deployment, "eks#gpu-a/ml/train/uid-1").cluster == "gpu-a"


def test_the_installed_command_without_credentials_prints_one_line_and_exits_1(tmp_path: Path) -> None:
    # Given a fresh shell: no credentials, no AWS config, no osprey local (instance metadata off: no network)
    keep = ("PATH", "HOME", "LANG", "SYSTEMROOT")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env |= {
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
        "OSPREY_LOCAL_STATE": str(tmp_path / "local.json"),
    }

    # When the user runs `osprey jobs` (the console script's entry point, in its own process)
    done = subprocess.run(
        [sys.executable, "-c", "from osprey.cli.main import main; main()", "jobs"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    # Then one line on stderr says what to set, nothing on stdout, exit 1
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: no AWS credentials found: set AWS_PROFILE (and run `aws sso login` if it uses SSO) or "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or pass --profile; without an account, run `osprey local up`"
    ]
