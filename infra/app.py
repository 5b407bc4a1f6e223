"""The Osprey CDK app: ``npx cdk synth`` / ``npx cdk deploy`` (docs/deploy.md).

Configuration comes from CDK context (``cdk.json`` or ``-c osprey:cycleIntervalSeconds=30``; keys in
``osprey_infra.config.CONTEXT_KEYS``) and is validated here, at synth. cdk-nag's AwsSolutions checks run on
every synth; a finding fails it.

The stack is environment-agnostic. The CDK CLI deploys such a stack to the account and region of its
credentials, which it tells the app as ``CDK_DEFAULT_ACCOUNT`` / ``CDK_DEFAULT_REGION``; those are what the
policies' custom rule ARNs are checked against (without credentials, only the name prefix is checked).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

sys.path.insert(0, str(Path(__file__).resolve().parent))

from osprey_infra.config import ConfigError, ControlPlaneConfig
from osprey_infra.policy_store import PolicySynthError
from osprey_infra.stack import OspreyStack

REPO_ROOT = Path(__file__).resolve().parent.parent


def build_app(app: cdk.App | None = None, *, nag: bool = True) -> cdk.App:
    app = app or cdk.App()
    policy_dir = REPO_ROOT / str(app.node.try_get_context("osprey:policyDir") or "policies")
    config = ControlPlaneConfig.from_context(app.node.try_get_context)
    OspreyStack(
        app,
        "Osprey",
        policy_paths=[policy_dir],
        config=config,
        deploy_environment=cdk.Environment(
            account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
        ),
        description="Osprey GPU-job priority control plane",
    )
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def main() -> int:
    """``cdk synth``'s entry point: a bad policy or setting is reported as its message alone (file, field
    path, rule), not as a Python traceback."""
    try:
        build_app().synth()
    except (PolicySynthError, ConfigError) as error:
        print(f"osprey: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
