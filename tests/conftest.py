"""Suite-wide settings. CI (CI=true) runs hypothesis derandomised so a red build is reproducible."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, max_examples=300, deadline=None)
settings.register_profile(
    "dev", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

REPO_ROOT = Path(__file__).resolve().parent.parent

# jsii (aws-cdk-lib) prints a banner on every process start under Node 20; it says nothing actionable here.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# sagemaker 2.x warns that v3 exists on import; Osprey needs v2 (v3 has no sagemaker.pytorch), DESIGN §9.
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(autouse=True)
def _no_developer_local(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The CLI finds a running ``osprey local`` by its state file (``~/.osprey/local.json``): a test must never
    find the developer's own. Tests (or module fixtures) that start one set ``OSPREY_LOCAL_STATE`` themselves."""
    if "OSPREY_LOCAL_STATE" not in os.environ:
        monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path_factory.getbasetemp() / "no-local.json"))
