"""After ``cdk deploy`` into moto, the stack's state machine is made executable under its published ARN."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
from moto import mock_aws

from osprey.local.cdk import make_executable, published_config

TEMPLATE = {
    "Resources": {
        "Role": {
            "Type": "AWS::IAM::Role",
            "Properties": {"AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": []}},
        },
        "Cycle": {
            "Type": "AWS::StepFunctions::StateMachine",
            "Properties": {
                "StateMachineName": "osprey-cycle",
                "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
                "DefinitionString": json.dumps(
                    {
                        "StartAt": "Done",
                        "States": {"Done": {"Type": "Pass", "Result": {"ok": True}, "End": True}},
                    }
                ),
            },
        },
        "Config": {
            "Type": "AWS::SSM::Parameter",
            "Properties": {
                "Name": "/osprey/config",
                "Type": "String",
                "Value": {"Fn::Join": ["", ['{"cycleStateMachineArn":"', {"Ref": "Cycle"}, '"}']]},
            },
        },
    }
}


def _client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1")  # type: ignore[call-overload]


def test_a_cloudformation_state_machine_runs_after_make_executable() -> None:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        # Given a stack deployed through CloudFormation: its state machine is not where executions run
        _client("cloudformation").create_stack(StackName="Osprey", TemplateBody=json.dumps(TEMPLATE))
        sfn = _client("stepfunctions")
        assert sfn.list_state_machines()["stateMachines"] == []
        published = published_config(_client)["cycleStateMachineArn"]

        # When it is made executable
        created = make_executable(_client)

        # Then it exists under the ARN /osprey/config publishes, runs, and a second call changes nothing
        assert created == [published]
        arn = sfn.start_execution(stateMachineArn=published, name="one", input="{}")["executionArn"]
        deadline = time.monotonic() + 30
        while (status := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert (status["status"], json.loads(status["output"])) == ("SUCCEEDED", {"ok": True})
        assert make_executable(_client) == []
