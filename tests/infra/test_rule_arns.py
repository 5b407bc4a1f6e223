"""Given policies whose custom rules name Lambda functions, when the control plane is synthesized for a
deployment, then a rule the deployment could not invoke (name outside the allowed prefix, another account or
region) fails the synth with the policy file, the field path and what is allowed; what synth cannot know (an
environment-agnostic stack's account) is left unchecked; and the policies deployed by default synthesize into
any account."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from osprey_infra.config import ControlPlaneConfig
from osprey_infra.policy_store import PolicySynthError
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT

EXAMPLES = REPO_ROOT / "policies" / "examples"
SPOT = (
    EXAMPLES / "spot-aware-policy.yaml"
)  # its rule: arn:aws:lambda:us-east-1:123456789012:function:osprey-rule-spot
FIELD = f"{SPOT}: spec.derivationRules[2].custom.arn: "
ACCOUNT = "210987654321"  # a real deployment's account: not the example's placeholder


def _synth(policies: Path, *, env: cdk.Environment | None = None, **kwargs: Any) -> OspreyStack:
    config = kwargs.pop("config", ControlPlaneConfig())
    return OspreyStack(cdk.App(), "Test", policy_paths=[policies], config=config, env=env, **kwargs)


@pytest.mark.parametrize(
    ("account", "region", "why"),
    [
        (ACCOUNT, "us-east-1", f"is in account 123456789012; only functions in {ACCOUNT} may be invoked"),
        ("123456789012", "eu-west-1", "is in region us-east-1; only functions in eu-west-1 may be invoked"),
    ],
)
def test_synth_refuses_a_rule_in_another_account_or_region_naming_the_file_and_field(
    account: str, region: str, why: str
) -> None:
    # Given the spot-aware example (account 123456789012, us-east-1) and a stack deployed elsewhere
    # When it is synthesized
    with pytest.raises(PolicySynthError) as raised:
        _synth(EXAMPLES, env=cdk.Environment(account=account, region=region))
    # Then the error names the file and field, why, and what the deployment may invoke
    message = str(raised.value)
    assert f"{FIELD}arn:aws:lambda:us-east-1:123456789012:function:osprey-rule-spot {why}" in message
    assert f"allowed: Lambda functions named osprey-rule-* in account {account}, region {region}" in message


def test_synth_refuses_a_rule_outside_the_allowed_prefix_even_when_the_account_is_unknown() -> None:
    # Given an environment-agnostic stack (account and region are tokens) whose prefix is team-a-rule-
    config = ControlPlaneConfig.build({"allowed_rule_prefix": "team-a-rule-"})
    # When the example (a function named osprey-rule-spot) is synthesized
    with pytest.raises(PolicySynthError) as raised:
        _synth(EXAMPLES, config=config)
    # Then the prefix, which synth always knows, refuses it
    assert f"{FIELD}" in str(raised.value)
    assert "function name must start with 'team-a-rule-'" in str(raised.value)
    assert "allowed: Lambda functions named team-a-rule-*" in str(raised.value)


def test_an_environment_agnostic_stack_checks_the_account_it_will_be_deployed_to_when_told() -> None:
    # Given an environment-agnostic stack: synth alone cannot know the account, so the example passes ...
    assert _synth(EXAMPLES).policies.parameters.keys() == {"spot-aware-policy"}
    # ... but told where the CDK CLI will deploy it (the app passes CDK_DEFAULT_ACCOUNT / _REGION)
    with pytest.raises(PolicySynthError, match=f"only functions in {ACCOUNT} may be invoked"):
        _synth(EXAMPLES, deploy_environment=cdk.Environment(account=ACCOUNT, region="us-east-1"))


def test_the_policies_deployed_by_default_synthesize_into_any_account() -> None:
    # Given a real account and region that are not the examples' placeholder
    stack = _synth(REPO_ROOT / "policies", env=cdk.Environment(account=ACCOUNT, region="eu-west-1"))
    # Then the shipped policies/ synthesize, and the placeholder example is not among them
    assert "spot-aware-policy" not in stack.policies.parameters
    assert {"default-policy", "training-policy"} <= stack.policies.parameters.keys()


def test_the_app_entry_point_refuses_a_rule_outside_the_account_the_cli_deploys_to(tmp_path: Path) -> None:
    # What `cdk deploy` runs, with the account and region the CDK CLI resolved from the credentials
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"osprey:policyDir": str(EXAMPLES)}),
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        "CDK_DEFAULT_ACCOUNT": ACCOUNT,
        "CDK_DEFAULT_REGION": "us-east-1",
    }
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "infra" / "app.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # Then it exits 1 with the file and field, not a traceback
    assert done.returncode == 1
    assert f"{FIELD}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(
    not (REPO_ROOT / "node_modules" / ".bin" / "cdk").exists(), reason="the CDK CLI is not installed (npm ci)"
)
def test_npx_cdk_synth_refuses_a_rule_outside_the_allowed_prefix(tmp_path: Path) -> None:
    done = subprocess.run(
        ["npx", "--no-install", "cdk", "synth", "-q", "--no-notices", "-o", str(tmp_path / "cdk.out"),
         "-c", f"osprey:policyDir={EXAMPLES}", "-c", "osprey:allowedRulePrefix=team-a-rule-"],
        cwd=REPO_ROOT,
        env={**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert f"{FIELD}" in output
    assert "function name must start with 'team-a-rule-'" in output
