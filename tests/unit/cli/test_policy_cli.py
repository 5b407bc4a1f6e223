"""Given policy files, when a user runs `osprey policy validate|schema`, then the exit code and the
`FILE: FIELD.PATH: message` lines tell them what to fix."""

from __future__ import annotations

import json
from pathlib import Path

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
    for name in ("aging-policy", "inference-policy", "spot-aware-policy", "training-policy"):
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
