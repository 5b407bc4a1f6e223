"""Given the synthesized control plane, when every IAM condition on the opt-in tag is read, then each compares
exactly to the one opt-in value the SDK writes and every reader accepts (``osprey_control.contract.opt_in``):
``StringEquals`` to ``true``, never a case-insensitive or wildcard match (issue 28 item 8)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from osprey_control.contract import ENABLED_TAG, OPT_IN
from osprey_infra.config import ControlPlaneConfig
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT

TAG_KEY = f"aws:ResourceTag/{ENABLED_TAG}"


def _conditions(template: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every (operator, value) of a condition on the opt-in tag, over every IAM policy of the template."""
    found: list[tuple[str, Any]] = []
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            for operator, tests in (statement.get("Condition") or {}).items():
                found += [(operator, value) for key, value in tests.items() if key == TAG_KEY]
    return found


def test_every_condition_on_the_opt_in_tag_is_an_exact_match_of_the_one_value() -> None:
    # Given a control plane with every backend (EKS included)
    stack = OspreyStack(
        cdk.App(),
        "Test",
        policy_paths=[REPO_ROOT / "policies"],
        config=ControlPlaneConfig.build({"eks_clusters": ["gpu-a"]}),
    )
    # When the conditions on aws:ResourceTag/osprey:enabled are collected
    conditions = _conditions(Template.from_stack(stack).to_json())
    # Then there are some (the appliers' and gang backends' writes), and each is StringEquals "true"
    assert len(conditions) >= 3, json.dumps(conditions)
    assert set(conditions) == {("StringEquals", OPT_IN)}
