"""The installed package finds what it ships inside itself, and the source checkout only where a command deploys
the CDK app (``osprey local``, ``osprey cost`` without ``--template``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from osprey.checkout import SOURCE_VARIABLE, CheckoutNotFoundError, find_checkout
from osprey.cli.main import app
from osprey_control.policy import load_policies
from osprey_control.policy.shipped import shipped_policy_dir, shipped_policy_file
from tests.conftest import REPO_ROOT


def test_shipped_policies_are_the_repositorys_policies() -> None:
    # Given the policies the package ships, When they are listed
    shipped = {path.name for path in shipped_policy_dir().glob("*.yaml")}
    # Then they are exactly the files in policies/, which `cdk deploy` deploys
    assert shipped == {path.name for path in (REPO_ROOT / "policies").glob("*.yaml")}
    assert load_policies([shipped_policy_file("default-policy")])[0].name == "default-policy"


def test_an_unknown_shipped_policy_names_the_known_ones() -> None:
    with pytest.raises(FileNotFoundError, match="default-policy"):
        shipped_policy_file("no-such-policy")


def test_the_checkout_is_found_from_inside_it_and_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a working directory deep inside the clone
    monkeypatch.delenv(SOURCE_VARIABLE, raising=False)
    assert find_checkout(REPO_ROOT / "docs") == REPO_ROOT
    # Given $OSPREY_SOURCE naming something that is not a clone, Then the error says what a clone needs
    monkeypatch.setenv(SOURCE_VARIABLE, str(tmp_path))
    with pytest.raises(CheckoutNotFoundError, match=r"infra/app\.py"):
        find_checkout()


def test_cost_without_a_checkout_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given no checkout to synthesize from
    monkeypatch.setenv(SOURCE_VARIABLE, str(tmp_path))
    # When osprey cost runs without --template
    result = CliRunner().invoke(app, ["cost", "--nodes", "4", "--gpus-per-node", "8", "--jobs", "4"])
    # Then it exits 1 naming the option and how to fix it
    assert result.exit_code == 1
    assert "--template" in result.output or "--agent-config" in result.output
    assert SOURCE_VARIABLE in result.output
    assert "Traceback" not in result.output


def test_the_wheel_carries_the_shipped_policies_and_the_trace(tmp_path: Path) -> None:
    # Given a wheel built from a copy of the sources (setuptools builds in-tree; the checkout stays clean), with
    # no network: the build backend is already installed
    source = tmp_path / "src"
    for name in ("sdk", "lambdas", "policies"):
        shutil.copytree(REPO_ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            ".",
        ],
        cwd=source,
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("osprey_aws-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    # Then it holds every shipped policy and the simulator's trace, so nothing is read from outside the package
    for policy in (REPO_ROOT / "policies").glob("*.yaml"):
        assert f"osprey_control/policy/bundled/{policy.name}" in names
    assert any(name.startswith("osprey/simulate/data/") and name.endswith(".csv") for name in names)
    assert not any(name.startswith(("infra/", "lambdas/", "tests/")) for name in names)
