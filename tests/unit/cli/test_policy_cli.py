"""Given policy files, when a user runs `osprey policy validate|schema`, then the exit code and the
`FILE: FIELD.PATH: message` lines tell them what to fix."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.policy import policy_json_schema
from tests.unit.policy.seeds import SEED_POLICY

runner = CliRunner()


def test_valid_set_exits_zero(repo_root: Path) -> None:
    policies = repo_root / "policies"
    result = runner.invoke(app, ["policy", "validate", str(policies)])
    assert result.exit_code == 0, result.output
    # One policy per shipped file; the seed four are among them.
    count = len(list(policies.glob("*.yaml")))
    assert result.stdout.startswith(f"{count} valid policies: ")
    for name in ("aging-policy", "default-policy", "inference-policy", "training-policy"):
        assert name in result.stdout


def test_invalid_files_exit_one_with_one_line_per_error(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(SEED_POLICY)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        SEED_POLICY.replace("name: training-policy", "name: other")
        .replace("weight: 0.6", "weight: 1001")
        .replace("scaling: inverse", "scaling: inverted")
    )
    result = runner.invoke(app, ["policy", "validate", str(good), str(bad)])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{bad}: spec.derivationRules[0].weight: ")
    assert "(0, 1000]" in lines[0]
    assert lines[1].startswith(f"{bad}: spec.derivationRules[2].scaling: ")
    assert lines[2] == "2 error(s) in 2 path(s)"


def test_same_name_in_two_paths_fails(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(SEED_POLICY)
    copy = tmp_path / "copy" / "b.yaml"
    copy.parent.mkdir()
    copy.write_text(SEED_POLICY)
    result = runner.invoke(app, ["policy", "validate", str(tmp_path / "a.yaml"), str(copy.parent)])
    assert result.exit_code == 1
    assert f"{copy}: metadata.name: policy name 'training-policy' is already defined" in result.stderr


def test_weights_not_summing_to_one_only_warn(tmp_path: Path) -> None:
    file = tmp_path / "p.yaml"
    file.write_text(SEED_POLICY.replace("weight: 0.1", "weight: 0.2"))
    result = runner.invoke(app, ["policy", "validate", str(file)])
    assert result.exit_code == 0
    assert f"{file}: spec.derivationRules: warning: weights sum to 1.1" in result.stderr


def test_missing_argument_is_a_usage_error() -> None:
    assert runner.invoke(app, ["policy", "validate"]).exit_code == 2


def test_schema_prints_the_json_schema() -> None:
    result = runner.invoke(app, ["policy", "schema"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == policy_json_schema()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("osprey 0.")


SPOT_FIELD = "spot-aware-policy.yaml: spec.derivationRules[2].custom.arn: "


def test_the_documents_alone_pass_without_the_deployment_settings(repo_root: Path) -> None:
    # The example's rule names the placeholder account: only a deployment can say that is wrong
    result = runner.invoke(app, ["policy", "validate", str(repo_root / "policies" / "examples")])
    assert result.exit_code == 0, result.output


def test_given_the_deployment_a_rule_it_cannot_invoke_exits_one_naming_file_field_and_what_is_allowed(
    repo_root: Path,
) -> None:
    examples = repo_root / "policies" / "examples"
    # When validated for another account, then for a prefix the rule's name lacks
    account = runner.invoke(
        app, ["policy", "validate", str(examples), "--account", "210987654321", "--region", "us-east-1"]
    )
    prefix = runner.invoke(
        app, ["policy", "validate", str(examples), "--allowed-rule-prefix", "team-a-rule-"]
    )
    # Then both exit 1 with one line naming the file and field, why, and what is allowed; no traceback
    assert account.exit_code == 1
    (line, summary) = account.stderr.splitlines()
    assert line.startswith(
        f"{examples / SPOT_FIELD}arn:aws:lambda:us-east-1:123456789012:function:osprey-rule-spot"
    )
    assert "only functions in 210987654321 may be invoked" in line
    assert line.endswith(
        "allowed: Lambda functions named osprey-rule-* in account 210987654321, region us-east-1, partition aws"
    )
    assert summary == "1 error(s) in 1 path(s)"
    assert prefix.exit_code == 1
    assert "function name must start with 'team-a-rule-'" in prefix.stderr
    assert "Traceback" not in account.output + prefix.output
    # ... and the example's own account and region pass
    own = runner.invoke(
        app, ["policy", "validate", str(examples), "--account", "123456789012", "--region", "us-east-1"]
    )
    assert own.exit_code == 0, own.output


def test_deployment_reads_the_prefix_account_and_region_from_the_deployed_config(
    repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    examples = str(repo_root / "policies" / "examples")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        # Given no deployment: a clear error, exit 1
        missing = runner.invoke(app, ["policy", "validate", examples, "--deployment"])
        assert missing.exit_code == 1
        assert "/osprey/config not found" in missing.stderr
        # Given a deployment whose prefix is team-a-rule- (what its stack published)
        config = {
            "tableName": "osprey-registry",
            "allowedRulePrefix": "team-a-rule-",
            "account": "123456789012",
            "region": "us-east-1",
        }
        boto3.client("ssm").put_parameter(Name="/osprey/config", Value=json.dumps(config), Type="String")
        # When validated against it, then the rule's name is refused
        refused = runner.invoke(app, ["policy", "validate", examples, "--deployment"])
        assert refused.exit_code == 1
        assert "function name must start with 'team-a-rule-'" in refused.stderr
        # ... and a flag given as well wins over the deployed value
        flagged = runner.invoke(
            app, ["policy", "validate", examples, "--deployment", "--allowed-rule-prefix", "osprey-rule-"]
        )
        assert flagged.exit_code == 0, flagged.output
