"""The Osprey CDK app: ``npx cdk synth`` / ``npx cdk deploy`` (after ``bash .ci/setup``)."""

from __future__ import annotations

import sys
from pathlib import Path

import aws_cdk as cdk

sys.path.insert(0, str(Path(__file__).resolve().parent))

from osprey_infra.stack import OspreyStack

REPO_ROOT = Path(__file__).resolve().parent.parent


def build_app(app: cdk.App | None = None) -> cdk.App:
    app = app or cdk.App()
    policy_dir = REPO_ROOT / str(app.node.try_get_context("osprey:policyDir") or "policies")
    OspreyStack(app, "Osprey", policy_paths=[policy_dir])
    return app


if __name__ == "__main__":
    build_app().synth()
