"""``osprey.sagemaker``: the seed estimator of issue 3 (only its import changed), against moto."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from sagemaker.estimator import Estimator

from osprey.sagemaker import OspreyBlockError, PyTorch, block_of, enable
from osprey_control.contract import from_environment, from_tags, parse_block
from tests.sdk.conftest import ROLE, AwsCalls

role = ROLE

SEED_DISTRIBUTION: dict[str, Any] = {
    "torch_distributed": {
        "enabled": True,
        "osprey": {
            "co_schedule": True,
            "gang_timeout": 120,
            "priority_derivation_profile": "training-policy",
        },
    }
}
SEED_HYPERPARAMETERS = {"epochs": 10, "batch_size": 64, "model_parallel_size": 4}
FRAMEWORK = {"framework_version": "2.3.0", "py_version": "py311"}


def seed_estimator(session: Any, distribution: dict[str, Any] | None = None, **extra: Any) -> PyTorch:
    return PyTorch(
        entry_point="train.py",
        role=role,
        instance_count=8,
        instance_type="ml.p4d.24xlarge",
        distribution=distribution if distribution is not None else copy.deepcopy(SEED_DISTRIBUTION),
        hyperparameters=dict(SEED_HYPERPARAMETERS),
        sagemaker_session=session,
        **FRAMEWORK,
        **extra,
    )


def test_given_the_seed_estimator_when_fit_then_the_request_has_exactly_the_osprey_environment_and_tags(
    sagemaker_session: Any, aws_calls: AwsCalls, training_script: Any
) -> None:
    # Given: the seed's code with only its import changed (plus framework version and a session)
    distribution = copy.deepcopy(SEED_DISTRIBUTION)
    estimator = seed_estimator(sagemaker_session, distribution)

    # When
    estimator.fit(wait=False)

    # Then: one CreateTrainingJob with exactly Osprey's environment and tags
    (request,) = aws_calls.create_training_job
    assert request["Environment"] == {
        "OSPREY_ENABLED": "1",
        "OSPREY_PRIORITY_POLICY": "training-policy",
        "OSPREY_CO_SCHEDULE": "true",
        "OSPREY_GANG_TIMEOUT": "120",
    }
    assert request["Tags"] == [
        {"Key": "osprey:enabled", "Value": "true"},
        {"Key": "osprey:policy", "Value": "training-policy"},
        {"Key": "osprey:co-schedule", "Value": "true"},
        {"Key": "osprey:gang-timeout", "Value": "120"},
    ]
    # ... the user's hyperparameters and torch_distributed's own, and nothing from the osprey block
    hyperparameters = request["HyperParameters"]
    job_name = request["TrainingJobName"]
    assert hyperparameters == {
        "epochs": "10",
        "batch_size": "64",
        "model_parallel_size": "4",
        "sagemaker_torch_distributed_enabled": "true",
        "sagemaker_instance_type": '"ml.p4d.24xlarge"',
        "sagemaker_program": '"train.py"',
        "sagemaker_container_log_level": "20",
        "sagemaker_region": '"us-east-1"',
        "sagemaker_job_name": json.dumps(job_name),
        "sagemaker_submit_directory": json.dumps(
            f"s3://test-training-artifacts/{job_name}/source/sourcedir.tar.gz"
        ),
    }
    assert "osprey" not in json.dumps(hyperparameters)
    assert estimator.distribution == {"torch_distributed": {"enabled": True}}
    # ... and the caller's dict still has its block (it may be reused for another estimator)
    assert distribution == SEED_DISTRIBUTION
    assert estimator.osprey == parse_block(SEED_DISTRIBUTION["torch_distributed"]["osprey"])


def test_given_own_environment_and_tags_when_fit_then_they_are_kept_next_to_osprey_s(
    sagemaker_session: Any, aws_calls: AwsCalls, training_script: Any
) -> None:
    # Given: the user's own variables and tags, one of them repeating the block's value
    estimator = seed_estimator(
        sagemaker_session,
        environment={"NCCL_DEBUG": "INFO", "OSPREY_GANG_TIMEOUT": "120", "OSPREY_MIN_WORKERS": "75"},
        tags=[{"Key": "team", "Value": "vision"}],
    )

    # When
    estimator.fit(wait=False)

    # Then: everything is there, and the tags describe the same job as the environment
    (request,) = aws_calls.create_training_job
    assert request["Environment"]["NCCL_DEBUG"] == "INFO"
    assert {"Key": "team", "Value": "vision"} in request["Tags"]
    assert {"Key": "osprey:min-workers", "Value": "75"} in request["Tags"]
    assert from_environment(request["Environment"]) == from_tags(request["Tags"])
    assert estimator.osprey is not None
    assert estimator.osprey.required_min_workers == 75


def test_given_a_job_created_with_a_block_when_attached_then_the_block_comes_back_from_its_tags(
    sagemaker_session: Any, training_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # attach() polls the job until it completes; moto's job completes at once, so skip the sleeps.
    monkeypatch.setattr("time.sleep", lambda _seconds: None)
    # Given: a job whose block sets every field that tags carry
    block = {
        "co_schedule": True,
        "gang_timeout": 300,
        "priority_derivation_profile": "training-policy",
        "required_min_workers": 75,
        "initial_priority": 40,
    }
    distribution = {"torch_distributed": {"enabled": True, "osprey": block}}
    # moto's DescribeTrainingJob omits OutputDataConfig.KmsKeyId unless one was given; attach() needs it.
    kms_key = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"
    estimator = seed_estimator(sagemaker_session, distribution, output_kms_key=kms_key)
    estimator.fit(wait=False)

    # When
    job: Any = estimator.latest_training_job
    # sagemaker leaves attach() unannotated
    attach_pytorch: Any = PyTorch.attach
    attach_estimator: Any = Estimator.attach
    attached = attach_pytorch(job.name, sagemaker_session=sagemaker_session)

    # Then
    assert attached.osprey == parse_block(block)
    assert block_of(attached) == parse_block(block)
    assert block_of(attach_estimator(job.name, sagemaker_session)) == parse_block(block)


def test_given_a_generic_estimator_when_enabled_then_its_job_carries_the_block(
    sagemaker_session: Any, aws_calls: AwsCalls
) -> None:
    # Given
    estimator = Estimator(
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:1",
        role=role,
        instance_count=2,
        instance_type="ml.g5.12xlarge",
        environment={"MY_SETTING": "x"},
        sagemaker_session=sagemaker_session,
    )

    # When
    enable(estimator, co_schedule=False, priority_derivation_profile="inference-batch", initial_priority=10)
    estimator.fit(wait=False)

    # Then
    (request,) = aws_calls.create_training_job
    assert request["Environment"] == {
        "MY_SETTING": "x",
        "OSPREY_ENABLED": "1",
        "OSPREY_PRIORITY_POLICY": "inference-batch",
        "OSPREY_CO_SCHEDULE": "false",
        "OSPREY_INITIAL_PRIORITY": "10",
    }
    assert from_tags(request["Tags"]) == parse_block(
        {"co_schedule": False, "priority_derivation_profile": "inference-batch", "initial_priority": 10}
    )


def test_given_the_environment_form_when_read_back_then_it_is_the_same_model_as_the_block_form(
    sagemaker_session: Any, aws_calls: AwsCalls
) -> None:
    # Given: a plain Estimator opted in through its environment only
    estimator = Estimator(
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:1",
        role=role,
        instance_count=2,
        instance_type="ml.p4d.24xlarge",
        environment={
            "OSPREY_ENABLED": "1",
            "OSPREY_CO_SCHEDULE": "true",
            "OSPREY_GANG_TIMEOUT": "180",
            "OSPREY_PRIORITY_POLICY": "training-policy",
        },
        sagemaker_session=sagemaker_session,
    )

    # When
    estimator.fit(wait=False)

    # Then: the shared parser reads the job's environment into the block form's model
    (request,) = aws_calls.create_training_job
    block_form = parse_block(
        {"co_schedule": True, "gang_timeout": 180, "priority_derivation_profile": "training-policy"}
    )
    assert from_environment(request["Environment"]) == block_form
    assert block_of(estimator) == block_form


BAD_BLOCKS = [
    pytest.param({"co_schedul": True}, "co_schedul", "did you mean 'co_schedule'", id="unknown-key"),
    pytest.param({"gangTimeout": 120}, "gangTimeout", "did you mean 'gang_timeout'", id="camel-case-key"),
    pytest.param(
        {"gang_timeout": "120"}, "gang_timeout", "an integer number of seconds 1..86400", id="string"
    ),
    pytest.param({"gang_timeout": 0}, "gang_timeout", "1..86400", id="timeout-low"),
    pytest.param({"gang_timeout": 86401}, "gang_timeout", "1..86400", id="timeout-high"),
    pytest.param({"co_schedule": "yes"}, "co_schedule", "true or false", id="bool"),
    pytest.param(
        {"priority_derivation_profile": "Training_Policy"}, "priority_derivation_profile", "DNS-1123"
    ),
    pytest.param({"required_min_workers": 0}, "required_min_workers", "percent of the workers 1..100"),
    pytest.param({"initial_priority": 101}, "initial_priority", "0..100", id="priority-high"),
    pytest.param({"queue": "no spaces"}, "queue", "AWS Batch job queue", id="queue"),
    pytest.param({"share_identifier": "a*"}, "share_identifier", "fair-share identifier", id="share"),
]


@pytest.mark.parametrize(("change", "key", "allowed"), BAD_BLOCKS)
def test_given_a_bad_block_when_constructing_then_a_clear_error_comes_before_any_aws_call(
    sagemaker_session: Any, aws_calls: AwsCalls, change: dict[str, Any], key: str, allowed: str
) -> None:
    # Given
    block = {
        "co_schedule": True,
        "gang_timeout": 120,
        "priority_derivation_profile": "training-policy",
        **change,
    }
    distribution = {"torch_distributed": {"enabled": True, "osprey": block}}

    # When / Then
    with pytest.raises(OspreyBlockError) as raised:
        seed_estimator(sagemaker_session, distribution)
    message = str(raised.value)
    assert f"distribution.torch_distributed.osprey.{key}" in message
    assert allowed in message
    assert aws_calls.calls == []


def test_given_a_block_without_policy_when_constructing_then_the_missing_key_is_named(
    sagemaker_session: Any, aws_calls: AwsCalls
) -> None:
    distribution = {"torch_distributed": {"enabled": True, "osprey": {"co_schedule": True}}}
    with pytest.raises(
        OspreyBlockError, match=r"osprey\.priority_derivation_profile: required key is missing"
    ):
        seed_estimator(sagemaker_session, distribution)
    assert aws_calls.calls == []


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"environment": {"OSPREY_GANG_TIMEOUT": "60"}}, "environment OSPREY_GANG_TIMEOUT: 60 contradicts"),
        (
            {"environment": {"OSPREY_ENABLED": "0"}},
            "environment OSPREY_ENABLED: '0' contradicts the osprey block",
        ),
        ({"tags": [{"Key": "osprey:policy", "Value": "other"}]}, "tags osprey:policy: 'other' contradicts"),
        ({"tags": {"osprey:gang-timeot": "120"}}, "did you mean 'osprey:gang-timeout'"),
    ],
)
def test_given_a_user_value_contradicting_the_block_when_constructing_then_it_is_an_error(
    sagemaker_session: Any, aws_calls: AwsCalls, extra: dict[str, Any], expected: str
) -> None:
    with pytest.raises(OspreyBlockError) as raised:
        seed_estimator(sagemaker_session, **extra)
    assert expected in str(raised.value)
    assert aws_calls.calls == []


def test_given_enable_with_a_bad_block_when_called_then_error_before_any_aws_call(
    sagemaker_session: Any, aws_calls: AwsCalls
) -> None:
    estimator = Estimator(
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:1",
        role=role,
        instance_count=1,
        instance_type="ml.g5.xlarge",
        sagemaker_session=sagemaker_session,
    )
    with pytest.raises(
        OspreyBlockError, match=r"osprey\.initial_priorty: unknown key; did you mean 'initial_priority'"
    ):
        enable(estimator, priority_derivation_profile="training-policy", initial_priorty=5)
    assert aws_calls.calls == []


def test_given_an_expected_runtime_in_the_block_when_fit_then_environment_and_tags_carry_it(
    sagemaker_session: Any, aws_calls: AwsCalls, training_script: Any
) -> None:
    # Given: the seed's block plus the user's runtime estimate
    distribution = copy.deepcopy(SEED_DISTRIBUTION)
    distribution["torch_distributed"]["osprey"]["expected_runtime"] = 36000
    estimator = seed_estimator(sagemaker_session, distribution)

    # When
    estimator.fit(wait=False)

    # Then: DESIGN §5's variable and tag, and the block reads back from either
    (request,) = aws_calls.create_training_job
    assert request["Environment"]["OSPREY_EXPECTED_RUNTIME"] == "36000"
    assert {"Key": "osprey:expected-runtime", "Value": "36000"} in request["Tags"]
    assert from_tags(request["Tags"]) == estimator.osprey
    assert from_environment(request["Environment"]) == estimator.osprey
    assert estimator.osprey is not None
    assert estimator.osprey.expected_runtime == 36000
