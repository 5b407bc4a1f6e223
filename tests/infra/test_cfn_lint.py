"""Given the synthesized Osprey template (shipped configuration, and every optional feature switched on), when
cfn-lint checks it against the CloudFormation resource specifications, then it reports no error and no warning
beyond the justified ignores below."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]  # cfn-lint ships no py.typed

from app import build_app

# Justified ignores (rule id → why it does not apply to a CDK-synthesized template):
IGNORED: dict[str, str] = {
    # CDK's Function and StateMachine add DependsOn on their role construct, i.e. on the Role *and* its
    # DefaultPolicy, so the policy exists before the first invocation. The DefaultPolicy half is what matters;
    # the Role half duplicates the GetAtt on the role's ARN and is harmless.
    "W3005": "redundant DependsOn on a role CDK also references by GetAtt",
}
REGIONS = ["us-east-1", "eu-west-1"]
# Every optional feature on, so conditional resources are linted too.
FULL_CONTEXT: dict[str, Any] = {
    "osprey:cycleIntervalSeconds": "20",
    "osprey:eksClusters": "gpu-a,gpu-b",
    "osprey:perJobMetrics": "true",
    "osprey:alarmEmail": "oncall@example.com",
    "osprey:retainRegistry": "false",
    "osprey:sagemakerQueue": "true",
}


def _template_text(context: dict[str, Any]) -> str:
    app = build_app(cdk.App(context=context), nag=False)
    stack = app.node.find_child("Osprey")
    assert isinstance(stack, cdk.Stack)
    return json.dumps(Template.from_stack(stack).to_json())


@pytest.fixture(scope="module", params=["shipped", "full"])
def template_text(request: pytest.FixtureRequest) -> str:
    return _template_text({} if request.param == "shipped" else FULL_CONTEXT)


def test_cfn_lint_reports_no_error_or_warning(template_text: str) -> None:
    config = ManualArgs(regions=REGIONS, ignore_checks=sorted(IGNORED))
    matches = lint(template_text, config=config)
    found = [f"{m.rule.id} {'/'.join(str(p) for p in m.path)}: {m.message}" for m in matches]
    assert found == []


def test_the_ignored_rules_are_still_needed(template_text: str) -> None:
    # An ignore that no longer matches anything is removed, so the list stays honest.
    matches = lint(template_text, config=ManualArgs(regions=REGIONS[:1]))
    assert {m.rule.id for m in matches} <= set(IGNORED)
    assert {m.rule.id for m in matches} == set(IGNORED)
