"""Given a deployment where one stored policy is 4 KB of ``[`` (no good version: its jobs are held) and another
was overwritten with a broken value (its jobs run under its last good version), when a user runs ``osprey jobs``
and ``osprey explain``, then each job's row says which of the two applies, naming the policy and the error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.policy_store import PolicySource
from osprey_control.steps.derive import derive_within
from tests.control.steps.cycle.conftest import NOW, gpu_metrics, register
from tests.control.steps.cycle.test_bad_policy import BROKEN, register_under

runner = CliRunner()


@pytest.fixture
def fleet(aws: dict[str, Any]) -> dict[str, Any]:
    register(aws["registry"], "busy-job", "i-0busy")
    gpu_metrics(aws["cloudwatch"], "i-0busy", gpu=97.0, memory_bw=80.0)
    register_under(aws["registry"], "held-job", "broken-policy")
    register_under(aws["registry"], "aging-job", "aging-policy")
    aws["ssm"].put_parameter(Name="/osprey/policies/broken-policy", Value=BROKEN, Type="String")
    aws["ssm"].put_parameter(
        Name="/osprey/policies/aging-policy", Value='{"apiVersion": 1}', Type="String", Overwrite=True
    )
    derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    )
    return aws


def test_jobs_shows_each_jobs_policy_state(fleet: dict[str, Any]) -> None:
    # When the user lists the jobs as JSON
    result = runner.invoke(app, ["jobs", "--table", "osprey-jobs", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    # Then each row says whether its policy is valid, held or running on its last good version
    assert {name: (row["policy_state"], row["policy_version"]) for name, row in rows.items()} == {
        "busy-job": ("valid", None),
        "held-job": ("held", None),
        "aging-job": ("last-good", 1),
    }
    assert rows["busy-job"]["policy_error"] is None
    assert "nesting deeper than 32 levels" in rows["held-job"]["policy_error"]
    assert "keep their last applied priority" in rows["held-job"]["policy_error"]
    assert (
        "(ssm:/osprey/policies/aging-policy: apiVersion: invalid value (got 1); allowed: osprey.aws/v1; kind:"
        in (rows["aging-job"]["policy_error"])
    )
    # And the held job has no priority while the others were derived
    assert rows["held-job"]["priority"] is None
    assert rows["aging-job"]["priority"] is not None


def test_jobs_table_marks_the_policy_and_says_why(fleet: dict[str, Any]) -> None:
    result = runner.invoke(app, ["jobs", "--table", "osprey-jobs"])
    assert result.exit_code == 0, result.output
    assert "broken-policy (invalid: held)" in result.stdout
    assert "aging-policy (invalid: last good v1)" in result.stdout
    lines = [line for line in result.stdout.splitlines() if line.startswith("policy ")]
    assert len(lines) == 2
    assert lines[0].startswith("policy 'aging-policy' is invalid (ssm:/osprey/policies/aging-policy:")
    assert lines[0].endswith("its jobs are derived under its last good version (1) [1 job(s) listed]")
    assert "nesting deeper than 32 levels" in lines[1]


def test_explain_names_the_invalid_policy_and_what_the_job_gets(fleet: dict[str, Any]) -> None:
    held = runner.invoke(app, ["explain", "held-job", "--table", "osprey-jobs"])
    assert held.exit_code == 0, held.output
    assert "policy 'broken-policy' is invalid" in held.stdout
    assert "keep their last applied priority" in held.stdout
    assert "no decision yet: its policy is invalid" in held.stdout
    aging = runner.invoke(app, ["explain", "aging-job", "--table", "osprey-jobs", "--json"])
    assert aging.exit_code == 0, aging.output
    answer = json.loads(aging.stdout)
    assert (answer["policy_state"], answer["policy_version"]) == ("last-good", 1)
    assert answer["decision"] is not None
    valid = runner.invoke(app, ["explain", "busy-job", "--table", "osprey-jobs"])
    assert "is invalid" not in valid.stdout


def test_without_access_to_the_policies_jobs_still_list_with_a_warning(
    fleet: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a user who may read the registry but not the policy parameters
    def denied(self: PolicySource) -> None:
        raise ClientError(
            {"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "GetParametersByPath"
        )

    monkeypatch.setattr(PolicySource, "invalid_policies", denied)
    # When they list the jobs
    result = runner.invoke(app, ["jobs", "--table", "osprey-jobs", "--json"])
    # Then every job is listed, its policy state unknown, and stderr says why
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 3
    assert {row["policy_state"] for row in rows} == {None}
    assert "warning: cannot read the deployed policies" in result.stderr
    assert "AccessDeniedException" in result.stderr
