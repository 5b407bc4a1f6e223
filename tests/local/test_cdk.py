"""After ``cdk deploy`` into moto, the stack's state machines (the cycle and the gang watch) are made executable
under the ARNs ``/osprey/config`` publishes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from osprey.local.cdk import make_executable, published_config
from osprey.local.session import cloud_assembly_dir

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
        # The gang watch's shape: a Wait on a path of the input, then the end.
        "Gangs": {
            "Type": "AWS::StepFunctions::StateMachine",
            "Properties": {
                "StateMachineName": "osprey-gangs",
                "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
                "DefinitionString": json.dumps(
                    {
                        "StartAt": "WaitForWorkers",
                        "States": {
                            "WaitForWorkers": {
                                "Type": "Wait",
                                "SecondsPath": "$.step.waitSeconds",
                                "Next": "Done",
                            },
                            "Done": {"Type": "Succeed"},
                        },
                    }
                ),
            },
        },
        "Config": {
            "Type": "AWS::SSM::Parameter",
            "Properties": {
                "Name": "/osprey/config",
                "Type": "String",
                "Value": {
                    "Fn::Join": [
                        "",
                        [
                            '{"cycleStateMachineArn":"',
                            {"Ref": "Cycle"},
                            '","gangStateMachineArn":"',
                            {"Ref": "Gangs"},
                            '"}',
                        ],
                    ]
                },
            },
        },
    }
}


def _client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1")  # type: ignore[call-overload]


def _run(sfn: Any, arn: str, payload: dict[str, Any]) -> dict[str, Any]:
    execution = sfn.start_execution(stateMachineArn=arn, name="one", input=json.dumps(payload))[
        "executionArn"
    ]
    deadline = time.monotonic() + 30
    while (status := sfn.describe_execution(executionArn=execution))["status"] == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    described: dict[str, Any] = status
    return described


def test_the_cloudformation_state_machines_run_after_make_executable() -> None:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        # Given a stack deployed through CloudFormation: its state machine is not where executions run
        _client("cloudformation").create_stack(StackName="Osprey", TemplateBody=json.dumps(TEMPLATE))
        sfn = _client("stepfunctions")
        assert sfn.list_state_machines()["stateMachines"] == []
        config = published_config(_client)

        # When they are made executable
        created = make_executable(_client)

        # Then both exist under the ARNs /osprey/config publishes and run, and a second call changes nothing
        assert sorted(created) == sorted([config["cycleStateMachineArn"], config["gangStateMachineArn"]])
        cycle = _run(sfn, config["cycleStateMachineArn"], {})
        assert (cycle["status"], json.loads(cycle["output"])) == ("SUCCEEDED", {"ok": True})
        assert _run(sfn, config["gangStateMachineArn"], {"step": {"waitSeconds": 0}})["status"] == "SUCCEEDED"
        assert make_executable(_client) == []


def test_the_local_cloud_assembly_never_collides_with_npx_cdk_synth(tmp_path: Path) -> None:
    # Given a repository after `npx cdk synth` (every cloud assembly holds a *file* named cdk.out)
    synth = tmp_path / "cdk.out"
    synth.mkdir()
    (synth / "cdk.out").write_text('{"version":"36.0.0"}')

    # When osprey local picks where its own `cdk deploy` writes, for the demo's state file, the default one,
    # and even a state file a user put inside cdk.out
    for state in (tmp_path / "build" / "osprey-demo" / "local.json", tmp_path / ".osprey" / "local.json"):
        assembly = cloud_assembly_dir(state)
        assert assembly.parent == state.parent
        assert assembly.name == "local.cdk.out"
    inside = cloud_assembly_dir(synth / "demo-local.json")

    # Then it is never a directory named cdk.out, so neither `mkdir` here nor a later synth there fails
    assert inside == synth / "demo-local.cdk.out"
    inside.mkdir()
    assert (synth / "cdk.out").is_file()
