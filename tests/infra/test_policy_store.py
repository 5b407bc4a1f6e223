"""Given the CDK app, when it is synthesized, then every shipped policy is an SSM parameter holding its
canonical JSON, and an invalid policy fails synth with its field path."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from osprey_control.policy import PriorityDerivationPolicy
from osprey_infra.policy_store import PolicySynthError
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT
from tests.unit.policy.seeds import SEED_POLICY


def _template(policy_paths: list[Path]) -> Template:
    app = cdk.App()
    return Template.from_stack(OspreyStack(app, "Test", policy_paths=policy_paths))


def test_shipped_policies_become_ssm_parameters_with_defaults_filled_in() -> None:
    template = _template([REPO_ROOT / "policies"])
    parameters = template.find_resources("AWS::SSM::Parameter")
    by_name = {
        p["Properties"]["Name"]: p["Properties"]
        for p in parameters.values()
        if p["Properties"]["Name"].startswith("/osprey/policies/")
    }
    assert sorted(by_name) == [
        "/osprey/policies/aging-policy",
        "/osprey/policies/default-policy",
        "/osprey/policies/inference-policy",
        "/osprey/policies/training-policy",
    ]
    training = by_name["/osprey/policies/training-policy"]
    assert training["Type"] == "String"
    assert training["Tier"] == "Standard"
    stored = json.loads(training["Value"])
    assert stored["spec"]["maxPriorityChange"] == 10
    assert stored["spec"]["derivationRules"][0]["aggregation"] == "mean"
    # What the control plane reads back validates into the same policy.
    assert PriorityDerivationPolicy.model_validate(stored).name == "training-policy"
    template.has_resource_properties(
        "AWS::SSM::Parameter",
        {
            "Name": "/osprey/policies/training-policy",
            "Description": Match.string_like_regexp("training-policy.yaml"),
        },
    )


def test_invalid_policy_fails_synth_with_the_field_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SEED_POLICY.replace("weight: 0.3", "weight: 0"))
    with pytest.raises(PolicySynthError) as raised:
        _template([bad])
    assert f"{bad}: spec.derivationRules[1].weight: " in str(raised.value)


def test_empty_policy_directory_fails_synth(tmp_path: Path) -> None:
    with pytest.raises(PolicySynthError, match="no"):
        _template([tmp_path])
