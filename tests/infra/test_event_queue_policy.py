"""Given the synthesized control plane, when the ingest queue's resource policy is read, then only the three
EventBridge rules may send to it: every Allow names one rule by ``aws:SourceArn``, and an explicit Deny for any
principal covers every request whose ``aws:SourceArn`` is not one of the three rules (a direct SendMessage has
none, so it is denied whatever the sender's own IAM policy allows)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from osprey_infra.config import ControlPlaneConfig
from osprey_infra.event_ingestion import EVENT_PATTERNS
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT


@pytest.fixture(scope="module")
def template() -> Template:
    stack = OspreyStack(
        cdk.App(), "Test", policy_paths=[REPO_ROOT / "policies"], config=ControlPlaneConfig.build({})
    )
    return Template.from_stack(stack)


def _queue_statements(template: Template) -> tuple[str, list[dict[str, Any]]]:
    """The ingest queue's logical id (the queue the rules target) and its policy's statements."""
    rules = template.find_resources("AWS::Events::Rule")
    (queue,) = {
        target["Arn"]["Fn::GetAtt"][0] for rule in rules.values() for target in rule["Properties"]["Targets"]
    }
    (policy,) = [
        policy
        for policy in template.find_resources("AWS::SQS::QueuePolicy").values()
        if policy["Properties"]["Queues"] == [{"Ref": queue}]
    ]
    return queue, policy["Properties"]["PolicyDocument"]["Statement"]


def _actions(statement: dict[str, Any]) -> set[str]:
    actions = statement["Action"]
    return {actions} if isinstance(actions, str) else set(actions)


def _rule_arns(template: Template) -> set[str]:
    return {
        json.dumps({"Fn::GetAtt": [rule, "Arn"]}) for rule in template.find_resources("AWS::Events::Rule")
    }


def test_any_sender_but_the_three_event_rules_is_denied(template: Template) -> None:
    queue, statements = _queue_statements(template)
    denies = [s for s in statements if s["Effect"] == "Deny" and "sqs:SendMessage" in _actions(s)]
    # One Deny on SendMessage for every principal, on this queue
    (deny,) = [s for s in denies if "ArnNotEquals" in s.get("Condition", {})]
    assert deny["Principal"] == {"AWS": "*"}
    assert deny["Resource"] == {"Fn::GetAtt": [queue, "Arn"]}
    # Its exception is exactly the three rules (ArnNotEquals: a request from any other source, or none, matches)
    sources = deny["Condition"]["ArnNotEquals"]["aws:SourceArn"]
    assert len(sources) == len(EVENT_PATTERNS) == 3
    assert {json.dumps(source) for source in sources} == _rule_arns(template)
    # And no other condition narrows the Deny (conditions of one statement must all match for it to apply)
    assert set(deny["Condition"]) == {"ArnNotEquals"}
    assert set(deny["Condition"]["ArnNotEquals"]) == {"aws:SourceArn"}


def test_every_allow_to_send_names_one_event_rule(template: Template) -> None:
    _, statements = _queue_statements(template)
    allows = [s for s in statements if s["Effect"] == "Allow" and "sqs:SendMessage" in _actions(s)]
    assert len(allows) == 3
    for allow in allows:
        assert allow["Principal"] == {"Service": "events.amazonaws.com"}
        assert json.dumps(allow["Condition"]["ArnEquals"]["aws:SourceArn"]) in _rule_arns(template)
