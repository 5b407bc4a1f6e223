"""The synthesized app's IAM statements per function, shared by the least-privilege tests (one synth a run)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest

from app import build_app
from tests.infra.iam import function_statements
from tests.infra.test_slurm_bridge import SLURM


@pytest.fixture(scope="session")
def statements() -> dict[str, list[dict[str, Any]]]:
    """Each function's IAM statements in the app with every backend, an EKS cluster and a Slurm cluster."""
    app = build_app(
        cdk.App(context={"osprey:eksClusters": "gpu-a", "osprey:slurm": json.dumps(SLURM)}), nag=False
    )
    stack = app.node.find_child("Osprey")
    assert isinstance(stack, cdk.Stack)
    return function_statements(app.synth().get_stack_by_name(stack.stack_name).template)
