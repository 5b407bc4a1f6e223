"""Given the Osprey CDK app, when it is synthesized into a cloud assembly, then the one code asset every Osprey
function runs holds the control plane (``osprey_control``) and its entry points (``osprey_handlers``) and
nothing the functions never import: no simulator package (it lives in the SDK, ``sdk/osprey/simulate``) and no
CSV data."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest

from app import build_app


@pytest.fixture(scope="module")
def code_asset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The staged directory of the functions' code asset (``cdk.out/asset.<hash>``)."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    template = build_app(cdk.App(outdir=str(outdir)), nag=False).synth().get_stack_by_name("Osprey").template
    keys = {
        resource["Properties"]["Code"]["S3Key"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
        and str(resource["Properties"].get("Handler", "")).startswith("osprey_handlers.")
    }
    # Every function shares one asset: a second one would mean a function bundles something of its own.
    assert len(keys) == 1, json.dumps(sorted(keys))
    (key,) = keys
    staged = outdir / f"asset.{key.removesuffix('.zip')}"
    assert staged.is_dir(), (
        f"{staged} was not staged; the assembly holds {sorted(p.name for p in outdir.iterdir())}"
    )
    return staged


def test_the_code_asset_holds_the_control_plane_and_its_handlers(code_asset: Path) -> None:
    packages = {path.name for path in code_asset.iterdir() if (path / "__init__.py").is_file()}
    assert packages == {"osprey_control", "osprey_handlers"}


def test_the_code_asset_holds_no_simulator_and_no_csv(code_asset: Path) -> None:
    simulators = [str(p.relative_to(code_asset)) for p in code_asset.rglob("simulate*")]
    csv_files = [str(p.relative_to(code_asset)) for p in code_asset.rglob("*.csv")]
    assert simulators == []
    assert csv_files == []
