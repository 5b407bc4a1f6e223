"""Given the Planning construct on a bare stack, when it is synthesized, then the plan function runs the plan
handler with the table and namespace in its environment, and its role may only query the active-jobs index, read
plan requests, write plan records and read CloudWatch metrics."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match, Template

from osprey_infra.planning import Planning


@pytest.fixture(scope="module")
def template() -> Template:
    stack = cdk.Stack(cdk.App(), "Test")
    table = dynamodb.Table(
        stack,
        "Registry",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
    )
    table.add_global_secondary_index(
        index_name="active-jobs",
        partition_key=dynamodb.Attribute(name="active_shard", type=dynamodb.AttributeType.NUMBER),
    )
    Planning(
        stack,
        "Planning",
        table=table,
        environment={"OSPREY_METRICS_NAMESPACE": "/aws/osprey", "OSPREY_REGISTRY_SHARDS": "16"},
        layer=lambda_.LayerVersion.from_layer_version_arn(
            stack, "Layer", "arn:aws:lambda:us-east-1:017000801446:layer:AWSLambdaPowertoolsPythonV3:1"
        ),
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
    )
    return Template.from_stack(stack)


def _statements(template: Template) -> list[dict[str, Any]]:
    policies = template.find_resources("AWS::IAM::Policy")
    return [s for policy in policies.values() for s in policy["Properties"]["PolicyDocument"]["Statement"]]


def _actions(statement: dict[str, Any]) -> set[str]:
    actions = statement["Action"]
    return {actions} if isinstance(actions, str) else set(actions)


def test_the_function_runs_the_plan_handler_with_table_and_namespace(template: Template) -> None:
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "osprey_handlers.plan.handler",
            "Environment": {
                "Variables": Match.object_like(
                    {
                        "OSPREY_TABLE_NAME": {"Ref": Match.any_value()},
                        "OSPREY_METRICS_NAMESPACE": "/aws/osprey",
                    }
                )
            },
        },
    )


def test_the_role_reads_the_registry_writes_plans_and_reads_metrics_only(template: Template) -> None:
    statements = _statements(template)
    granted = set().union(*(_actions(s) for s in statements))
    assert granted == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "dynamodb:Query",
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",  # its writes check the lease's fencing token
        "cloudwatch:GetMetricData",
    }
    (table,) = [s for s in statements if "dynamodb:PutItem" in _actions(s)]
    assert table["Resource"] != "*"
    assert "dynamodb:Query" not in _actions(table)
    # Queries on the active-jobs index only, not on every index nor the table itself
    (query,) = [s for s in statements if "dynamodb:Query" in _actions(s)]
    assert json.dumps(query["Resource"]).endswith('"/index/active-jobs"]]}')
    (metrics,) = [s for s in statements if "cloudwatch:GetMetricData" in _actions(s)]
    assert metrics["Resource"] == "*"
    assert all(s["Effect"] == "Allow" for s in statements)
