"""Queued submission: ``queue`` in the block sends the job through AWS Batch ``SubmitServiceJob``.

moto does not implement SubmitServiceJob, so the Batch client is a real botocore client with a Stubber,
which validates every request against the real Batch service model.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from sagemaker.aws_batch.training_queued_job import TrainingQueuedJob
from sagemaker.estimator import Estimator

from osprey.sagemaker import OspreyBlockError, PyTorch, enable
from tests.sdk.conftest import REGION, ROLE, AwsCalls

QUEUE_ARN = "arn:aws:batch:us-east-1:123456789012:job-queue/osprey-training"
JOB_ARN = "arn:aws:batch:us-east-1:123456789012:service-job/0123abcd"


@pytest.fixture
def batch() -> Any:
    return boto3.client("batch", region_name=REGION)


def expect_submit(stubber: Stubber, **expected: Any) -> dict[str, Any]:
    """Expect one SubmitServiceJob with ``expected`` (the job name and payload vary) and capture it."""
    captured: dict[str, Any] = {}
    stubber.client.meta.events.register(
        "provide-client-params.batch.SubmitServiceJob", lambda params, **_: captured.update(params)
    )
    params = {
        "jobName": ANY,
        "jobQueue": QUEUE_ARN,
        "serviceJobType": "SAGEMAKER_TRAINING",
        "serviceRequestPayload": ANY,
        "retryStrategy": ANY,
        "timeoutConfig": {"attemptDurationSeconds": 86400},
        "tags": ANY,
        **expected,
    }
    stubber.add_response(
        "submit_service_job", {"jobArn": JOB_ARN, "jobName": "queued", "jobId": "0123abcd"}, params
    )
    return captured


@pytest.mark.parametrize(("initial_priority", "scheduling_priority"), [(70, 6999), (0, 0), (100, 9999)])
def test_given_a_queue_in_the_block_when_fit_then_the_job_is_submitted_to_batch_with_mapped_priority(
    sagemaker_session: Any,
    *,
    aws_calls: AwsCalls,
    training_script: Any,
    batch: Any,
    initial_priority: int,
    scheduling_priority: int,
) -> None:
    # Given
    block = {
        "co_schedule": True,
        "gang_timeout": 120,
        "priority_derivation_profile": "training-policy",
        "initial_priority": initial_priority,
        "queue": QUEUE_ARN,
        "share_identifier": "vision",
    }
    estimator = PyTorch(
        entry_point="train.py",
        role=ROLE,
        instance_count=8,
        instance_type="ml.p4d.24xlarge",
        distribution={"torch_distributed": {"enabled": True, "osprey": block}},
        framework_version="2.3.0",
        py_version="py311",
        sagemaker_session=sagemaker_session,
        batch_client=batch,
    )

    # When
    with Stubber(batch) as stubber:
        captured = expect_submit(stubber, schedulingPriority=scheduling_priority, shareIdentifier="vision")
        handle = estimator.fit(wait=False)
        stubber.assert_no_pending_responses()

    # Then: a queued job handle, no training job created directly
    assert isinstance(handle, TrainingQueuedJob)
    assert handle.job_arn == JOB_ARN
    assert "sagemaker.CreateTrainingJob" not in aws_calls.calls
    # ... and the queued CreateTrainingJob request carries the Osprey environment and tags
    payload = json.loads(captured["serviceRequestPayload"])
    assert payload["Environment"]["OSPREY_INITIAL_PRIORITY"] == str(initial_priority)
    assert {"Key": "osprey:policy", "Value": "training-policy"} in payload["Tags"]
    assert captured["jobName"] == payload["TrainingJobName"]
    assert captured["tags"]["osprey:enabled"] == "true"
    assert "osprey" not in json.dumps(payload["HyperParameters"])


def test_given_a_queue_without_initial_priority_when_fit_then_batch_gets_no_priority(
    sagemaker_session: Any, batch: Any
) -> None:
    # Given: the policy's initialPriority will apply on the control plane's first cycle
    estimator = Estimator(
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:1",
        role=ROLE,
        instance_count=2,
        instance_type="ml.g5.12xlarge",
        sagemaker_session=sagemaker_session,
    )
    enable(estimator, priority_derivation_profile="training-policy", queue=QUEUE_ARN, batch_client=batch)

    # When
    with Stubber(batch) as stubber:
        captured = expect_submit(stubber)
        handle = estimator.fit(wait=False)

    # Then
    assert handle.job_name == "queued"
    assert "schedulingPriority" not in captured
    assert "shareIdentifier" not in captured


def test_given_fit_with_default_wait_when_queued_then_polling_uses_the_injected_client_only(
    sagemaker_session: Any, training_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given: a Batch client in another region than the default, and no other client may be created
    batch = boto3.client("batch", region_name="eu-west-1")
    real_client = boto3.client

    def client(service: str, *args: Any, **kwargs: Any) -> Any:
        if service == "batch":
            pytest.fail("another Batch client was created")
        return real_client(service, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(boto3, "client", client)
    sleeps: list[float] = []
    monkeypatch.setattr("osprey.sagemaker._queue.time.sleep", sleeps.append)
    estimator = PyTorch(
        entry_point="train.py",
        role=ROLE,
        instance_count=2,
        instance_type="ml.p4d.24xlarge",
        distribution={
            "torch_distributed": {
                "enabled": True,
                "osprey": {"priority_derivation_profile": "training-policy", "queue": QUEUE_ARN},
            }
        },
        framework_version="2.3.0",
        py_version="py311",
        sagemaker_session=sagemaker_session,
        batch_client=batch,
    )

    # When: fit() waits by default
    with Stubber(batch) as stubber:
        expect_submit(stubber)
        for status in ("RUNNABLE", "RUNNING", "SUCCEEDED"):
            stubber.add_response(
                "describe_service_job",
                {"jobArn": JOB_ARN, "jobName": "queued", "jobId": "0123abcd", "jobQueue": QUEUE_ARN,
                 "serviceJobType": "SAGEMAKER_TRAINING", "status": status, "createdAt": 1, "startedAt": 1,
                 "retryStrategy": {"attempts": 1}, "isTerminated": status == "SUCCEEDED"},
                {"jobId": JOB_ARN},
            )  # fmt: skip
        handle = estimator.fit()
        stubber.assert_no_pending_responses()

    # Then: polled through the injected client until SUCCEEDED, at the SDK's 5 s interval
    assert handle.job_arn == JOB_ARN
    assert sleeps == [5, 5]


def test_given_osprey_outside_torch_distributed_when_constructing_then_an_error_points_to_the_right_place(
    sagemaker_session: Any,
) -> None:
    # When
    with pytest.raises(OspreyBlockError) as raised:
        PyTorch(
            entry_point="train.py",
            role=ROLE,
            instance_count=1,
            instance_type="ml.p4d.24xlarge",
            distribution={
                "osprey": {"priority_derivation_profile": "p"},
                "torch_distributed": {"enabled": True},
            },
            framework_version="2.3.0",
            py_version="py311",
            sagemaker_session=sagemaker_session,
        )

    # Then
    assert "distribution.osprey: the osprey block belongs in distribution.torch_distributed.osprey" in str(
        raised.value
    )


def test_given_an_environment_edited_to_contradict_when_fit_then_rejected_before_any_aws_request(
    sagemaker_session: Any, training_script: Any, aws_calls: AwsCalls
) -> None:
    # Given: a valid estimator whose environment is changed after construction
    estimator = PyTorch(
        entry_point="train.py",
        role=ROLE,
        instance_count=2,
        instance_type="ml.p4d.24xlarge",
        distribution={
            "torch_distributed": {
                "enabled": True,
                "osprey": {"priority_derivation_profile": "training-policy", "gang_timeout": 120},
            }
        },
        framework_version="2.3.0",
        py_version="py311",
        sagemaker_session=sagemaker_session,
    )
    estimator.environment["OSPREY_GANG_TIMEOUT"] = "60"

    # When
    with pytest.raises(OspreyBlockError) as raised:
        estimator.fit(wait=False)

    # Then: no upload, no CreateTrainingJob, nothing at all was sent (fit() otherwise uploads to S3 first)
    assert "environment OSPREY_GANG_TIMEOUT: 60 contradicts" in str(raised.value)
    assert aws_calls.calls == []
    assert aws_calls.create_training_job == []
