"""Given the context ``osprey:slurm``, when the app is synthesized, then the Slurm bridge is a function in the
cluster's subnets with its own security group (slurmrestd's port and HTTPS out, nothing in), least-privilege
permissions (the one secret, the registry's two calls), a discovery schedule, and the apply function may invoke
it and only it; cdk-nag and cfn-lint stay clean with it on; a bad value fails the synth naming its field.
Without the key nothing of it exists (the existing template tests run that case)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]

from app import build_app
from osprey_infra.config import ConfigError, ControlPlaneConfig
from tests.infra.test_cfn_lint import FULL_CONTEXT as LINT_CONTEXT
from tests.infra.test_cfn_lint import IGNORED, REGIONS
from tests.infra.test_nag import FULL_CONTEXT as NAG_CONTEXT
from tests.infra.test_nag import _synth, _where

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurm-jwt-AbCdEf"
SLURM = {
    "clusterName": "training",
    "url": "https://10.0.1.23:6820",
    "vpcId": "vpc-0123456789abcdef0",
    "subnetIds": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
    "tokenSecretArn": SECRET,
    "headNodeSecurityGroupId": "sg-0123456789abcdef0",
}


def _template(context: dict[str, Any]) -> Template:
    app = build_app(cdk.App(context=context), nag=False)
    stack = app.node.find_child("Osprey")
    assert isinstance(stack, cdk.Stack)
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def template() -> Template:
    return _template({"osprey:slurm": json.dumps(SLURM)})


def _bridge_arn() -> dict[str, Any]:
    """The bridge's ARN as the template spells it (from its name: no reference, so no dependency cycle)."""
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":lambda:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":function:Osprey-slurm-training",
            ],
        ]
    }


def _logical_id(template: Template, handler: str) -> str:
    (found,) = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": f"osprey_handlers.{handler}.handler"}}
    )
    return str(found)


def test_the_bridge_runs_in_the_clusters_subnets_behind_its_own_security_group(template: Template) -> None:
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "osprey_handlers.slurm_discovery.handler",
            "VpcConfig": {"SubnetIds": SLURM["subnetIds"], "SecurityGroupIds": [Match.any_value()]},
            "Environment": {
                "Variables": Match.object_like(
                    {
                        "OSPREY_SLURM_URL": "https://10.0.1.23:6820",
                        "OSPREY_SLURM_CLUSTER": "training",
                        "OSPREY_SLURM_TOKEN_SECRET": SECRET,
                        "OSPREY_SLURM_USER": "slurm",
                        "OSPREY_SLURM_INSTANCE_CLUSTER_TAG": "training",
                        "OSPREY_SLURM_INSECURE_HTTP": "false",
                        "OSPREY_SLURM_ALLOW_SIGNING_KEY": "false",
                    }
                )
            },
        },
    )
    groups = template.find_resources("AWS::EC2::SecurityGroup")
    (group,) = groups.values()
    egress = {(rule["FromPort"], rule["CidrIp"]) for rule in group["Properties"]["SecurityGroupEgress"]}
    assert egress == {(6820, "10.0.1.23/32"), (443, "0.0.0.0/0")}
    assert "SecurityGroupIngress" not in group["Properties"]
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"GroupId": SLURM["headNodeSecurityGroupId"], "FromPort": 6820, "ToPort": 6820, "IpProtocol": "tcp"},
    )


def test_permissions_are_the_secret_the_registrys_two_calls_and_invoke_of_the_bridge_only(
    template: Template,
) -> None:
    bridge = _logical_id(template, "slurm_discovery")
    policies = template.find_resources("AWS::IAM::Policy")
    statements = [
        s for policy in policies.values() for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    secret = [s for s in statements if s["Action"] == "secretsmanager:GetSecretValue"]
    assert [s["Resource"] for s in secret] == [SECRET]
    invokes = [s["Resource"] for s in statements if s["Action"] == "lambda:InvokeFunction"]
    assert _bridge_arn() in invokes
    dynamo = [
        s
        for s in statements
        if "dynamodb:PutItem" in str(s["Action"]) and s["Action"] == ["dynamodb:GetItem", "dynamodb:PutItem"]
    ]
    assert dynamo, "the bridge gets exactly GetItem and PutItem on the registry"
    apply = _logical_id(template, "apply")
    functions = template.find_resources("AWS::Lambda::Function")
    variables = functions[apply]["Properties"]["Environment"]["Variables"]
    assert variables["OSPREY_SLURM_BRIDGE_FUNCTION"] == "Osprey-slurm-training"
    assert template.find_resources("AWS::Lambda::Function")[bridge]["Properties"]["FunctionName"] == (
        "Osprey-slurm-training"
    )


def test_discovery_runs_on_its_own_schedule(template: Template) -> None:
    bridge = _logical_id(template, "slurm_discovery")
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(1 minute)",
            "Targets": [
                Match.object_like({"Arn": {"Fn::GetAtt": [bridge, "Arn"]}, "Input": '{"action":"discover"}'})
            ],
        },
    )


def test_without_the_context_key_there_is_no_bridge() -> None:
    template = _template({})
    assert not template.find_resources("AWS::EC2::SecurityGroup")
    handlers = [
        resource["Properties"]["Handler"]
        for resource in template.find_resources("AWS::Lambda::Function").values()
    ]
    assert "osprey_handlers.slurm_discovery.handler" not in handlers


def test_cdk_nag_stays_clean_with_slurm_and_every_other_feature_on(tmp_path: Path) -> None:
    context = {**NAG_CONTEXT, "osprey:slurm": json.dumps(SLURM)}
    synthesized = _synth(build_app(cdk.App(outdir=str(tmp_path), context=context)), tmp_path)
    assert synthesized.failed is None, synthesized.failed
    assert _where(synthesized.violations) == []
    assert synthesized.annotations == []


def test_cfn_lint_stays_clean_with_slurm_on() -> None:
    text = json.dumps(_template({**LINT_CONTEXT, "osprey:slurm": json.dumps(SLURM)}).to_json())
    matches = lint(text, config=ManualArgs(regions=REGIONS, ignore_checks=sorted(IGNORED)))
    assert [f"{m.rule.id} {'/'.join(str(p) for p in m.path)}: {m.message}" for m in matches] == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"url": "10.0.1.23:6820"}, "slurm.url"),
        ({"subnetIds": []}, "slurm.subnetIds"),
        ({"subnetIds": ["sn-1"]}, "slurm.subnetIds"),
        ({"tokenSecretArn": "slurm-jwt"}, "slurm.tokenSecretArn"),
        ({"priorityRange": "0..100"}, "slurm.priorityRange"),
        ({"colour": "blue"}, "slurm.colour"),
        ({"instanceClusterTag": "a b"}, "slurm.instanceClusterTag"),
        ({"url": "http://10.0.1.23:6820"}, "slurm.url"),  # the token would travel in clear
        ({"caCertificate": "not a certificate"}, "slurm.caCertificate"),
        ({"maxResponseBytes": 10}, "slurm.maxResponseBytes"),
    ],
)
def test_a_bad_slurm_setting_fails_the_synth_naming_its_field(change: dict[str, Any], field: str) -> None:
    raw = json.dumps({**SLURM, **change})
    with pytest.raises(ConfigError) as error:
        ControlPlaneConfig.from_context({"osprey:slurm": raw}.get)
    assert f"{field} (context osprey:slurm)" in str(error.value)


def test_plain_http_is_deployed_only_when_asked_for_by_name() -> None:
    # Given a cluster whose slurmrestd is reached over plain http, with the explicit flag
    template = _template(
        {"osprey:slurm": json.dumps({**SLURM, "url": "http://10.0.1.23:6820", "insecureHttp": True})}
    )
    # Then the bridge is told, so its own settings accept the URL too
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "osprey_handlers.slurm_discovery.handler",
            "Environment": {
                "Variables": Match.object_like(
                    {"OSPREY_SLURM_URL": "http://10.0.1.23:6820", "OSPREY_SLURM_INSECURE_HTTP": "true"}
                )
            },
        },
    )


def test_gang_watches_of_slurm_jobs_start_from_the_bridge_and_read_through_it(template: Template) -> None:
    bridge = _logical_id(template, "slurm_discovery")
    watch = _logical_id(template, "gang_watch")
    functions = template.find_resources("AWS::Lambda::Function")
    assert functions[watch]["Properties"]["Environment"]["Variables"]["OSPREY_SLURM_BRIDGE_FUNCTION"] == (
        "Osprey-slurm-training"
    )
    bridge_variables = functions[bridge]["Properties"]["Environment"]["Variables"]
    assert "OSPREY_GANG_STATE_MACHINE_ARN" in bridge_variables
    assert bridge_variables["OSPREY_POLICY_PREFIX"] == "/osprey/policies"
    policies = template.find_resources("AWS::IAM::Policy")
    statements = [
        s for policy in policies.values() for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert any(s["Action"] == "states:StartExecution" for s in statements)
    invokes = [s["Resource"] for s in statements if s["Action"] == "lambda:InvokeFunction"]
    assert invokes.count(_bridge_arn()) == 2  # apply and the gang watch, nothing else
