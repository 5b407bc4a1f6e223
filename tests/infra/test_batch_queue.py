"""Given ``sagemaker_queue`` (off by default), when the control plane is synthesized, then it holds a Batch
SAGEMAKER_TRAINING service environment and job queue with a fair-share policy (so ``schedulingPriority`` is
honoured), tagged for the apply role, under the name the SDK's ``queue`` field uses; and the apply role may
``UpdateServiceJob`` only on tagged service jobs."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from osprey_control.contract import ENABLED_TAG
from osprey_infra.backends.sagemaker_queue import SHARE_DECAY_SECONDS
from osprey_infra.config import ConfigError, ControlPlaneConfig
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT

TAGS = {ENABLED_TAG: "true"}


def _template(**config: Any) -> Template:
    stack = OspreyStack(
        cdk.App(), "Test", policy_paths=[REPO_ROOT / "policies"], config=ControlPlaneConfig.build(config)
    )
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def template() -> Template:
    return _template(
        sagemaker_queue=True, sagemaker_queue_name="team-a-training", sagemaker_queue_max_instances=16
    )


def test_off_by_default() -> None:
    default = _template()
    for kind in ("AWS::Batch::ServiceEnvironment", "AWS::Batch::JobQueue", "AWS::Batch::SchedulingPolicy"):
        default.resource_count_is(kind, 0)


def test_service_environment_caps_sagemaker_training_instances(template: Template) -> None:
    template.has_resource_properties(
        "AWS::Batch::ServiceEnvironment",
        {
            "ServiceEnvironmentType": "SAGEMAKER_TRAINING",
            "ServiceEnvironmentName": "team-a-training-env",
            "CapacityLimits": [{"CapacityUnit": "NUM_INSTANCES", "MaxCapacity": 16}],
            "State": "ENABLED",
            "Tags": TAGS,
        },
    )


def test_queue_is_the_one_the_sdk_submits_to_with_a_fair_share_policy(template: Template) -> None:
    (environment_id,) = template.find_resources("AWS::Batch::ServiceEnvironment")
    (policy_id,) = template.find_resources("AWS::Batch::SchedulingPolicy")
    template.has_resource_properties(
        "AWS::Batch::JobQueue",
        {
            # The SDK's request: jobQueue=<block.queue>, serviceJobType=SAGEMAKER_TRAINING.
            "JobQueueName": "team-a-training",
            "JobQueueType": "SAGEMAKER_TRAINING",
            "State": "ENABLED",
            "ServiceEnvironmentOrder": [
                {"Order": 1, "ServiceEnvironment": {"Fn::GetAtt": [environment_id, "ServiceEnvironmentArn"]}}
            ],
            "SchedulingPolicyArn": {"Fn::GetAtt": [policy_id, "Arn"]},
            "Tags": TAGS,
        },
    )
    template.has_resource_properties(
        "AWS::Batch::SchedulingPolicy",
        {
            "FairsharePolicy": {"ShareDecaySeconds": SHARE_DECAY_SECONDS, "ComputeReservation": 0},
            "Tags": TAGS,
        },
    )
    # A SAGEMAKER_TRAINING queue takes service environments, never compute environments.
    (queue,) = template.find_resources("AWS::Batch::JobQueue").values()
    assert "ComputeEnvironmentOrder" not in queue["Properties"]


def test_config_parameter_names_the_queue(template: Template) -> None:
    parameters = template.find_resources("AWS::SSM::Parameter")
    (config,) = [p for p in parameters.values() if p["Properties"]["Name"] == "/osprey/config"]
    assert '\\"sagemakerQueue\\":\\"team-a-training\\"' in json.dumps(config["Properties"]["Value"])


def test_apply_may_update_only_tagged_service_jobs(template: Template) -> None:
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": "batch:UpdateServiceJob",
                                "Condition": {"StringEquals": {f"aws:ResourceTag/{ENABLED_TAG}": "true"}},
                            }
                        )
                    ]
                ),
                "Version": "2012-10-17",
            }
        },
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"sagemaker_queue": True, "backends": ["batch"]}, "'sagemaker' is not among backends"),
        ({"sagemaker_queue_name": "bad name"}, "sagemaker_queue_name (context osprey:sagemakerQueueName)"),
        ({"sagemaker_queue_max_instances": 0}, "osprey:sagemakerQueueMaxInstances"),
    ],
)
def test_bad_queue_configuration_fails_synth(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ControlPlaneConfig.build(values)
    assert message in str(raised.value)


def test_context_switches_the_queue_on() -> None:
    context = {"osprey:sagemakerQueue": "true", "osprey:sagemakerQueueMaxInstances": "4"}
    config = ControlPlaneConfig.from_context(context.get)
    assert config.sagemaker_queue is True
    assert config.sagemaker_queue_max_instances == 4
