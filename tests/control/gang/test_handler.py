"""The gang watch Lambda and the watch starter, under moto."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from pydantic import ValidationError

from osprey_control.contract import parse_block
from osprey_control.gang import GangSettings
from osprey_control.policy import CoScheduling, GangFallback
from osprey_control.registry.model import Backend, JobKey, JobRecord
from osprey_control.steps.gang_start import register_gang, start_watch
from osprey_control.steps.gang_watch import execution_name
from osprey_handlers import gang_watch
from tests.control.gang.conftest import TABLE
from tests.lambda_context import lambda_context

SETTINGS = GangSettings(timeout_seconds=120, required_min_workers=100, fallback=GangFallback.FAIL)


@pytest.fixture
def handler_env(monkeypatch: pytest.MonkeyPatch, dynamodb: Any) -> Any:
    monkeypatch.setenv("OSPREY_TABLE_NAME", TABLE)
    gang_watch._settings.cache_clear()
    yield dynamodb
    gang_watch._settings.cache_clear()


def _create_training_job(name: str) -> None:
    boto3.client("sagemaker", region_name="us-east-1").create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": "image", "TrainingInputMode": "File"},
        RoleArn="arn:aws:iam::123456789012:role/sagemaker",
        OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
    )


def test_a_job_that_already_ended_ends_its_watch(
    handler_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a SageMaker job (moto completes it at once) and its watch input
    _create_training_job("llm-a")
    event = {
        "job": {"backend": "sagemaker", "nativeId": "llm-a"},
        "policy": "training",
        "settings": {"timeoutSeconds": 120, "requiredMinWorkers": 100, "fallback": "fail"},
    }
    # When the watch step runs
    result = gang_watch.handler(event, lambda_context("osprey-gang-watch", 256))
    # Then the watch is over, nothing was stopped, and the state is in the registry
    assert result["done"] is True
    assert result["action"] == "none"
    assert result["gang"]["phase"] == "ended"
    item = handler_env.get_item(
        TableName=TABLE, Key={"pk": {"S": "GANG#sagemaker#llm-a"}, "sk": {"S": "GANG"}}
    )
    assert item["Item"]["phase"] == {"S": "ended"}


def test_an_invalid_watch_input_names_the_field(handler_env: Any) -> None:
    event = {"job": {"backend": "lsf", "nativeId": "x"}, "policy": "training", "settings": {}}
    with pytest.raises(ValidationError, match=r"job\.backend"):
        gang_watch.handler(event, lambda_context("osprey-gang-watch", 256))


def test_a_duplicate_registration_starts_no_second_watch(handler_env: Any) -> None:
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    arn = sfn.create_state_machine(
        name="osprey-gang-watch",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
        roleArn="arn:aws:iam::123456789012:role/sfn",
    )["stateMachineArn"]
    key = JobKey(Backend.BATCH, "job-1")
    assert start_watch(arn, key, SETTINGS, "training", client=sfn) is True
    start_watch(arn, key, SETTINGS, "training", client=sfn)  # a replayed event
    executions = sfn.list_executions(stateMachineArn=arn)["executions"]
    assert [e["name"] for e in executions] == [execution_name(key)]
    sent = json.loads(sfn.describe_execution(executionArn=executions[0]["executionArn"])["input"])
    assert sent["settings"] == {
        "timeoutSeconds": 120,
        "requiredMinWorkers": 100,
        "fallback": "fail",
        "maxRequeues": 5,
    }


def test_a_finished_watch_of_the_same_name_is_not_restarted() -> None:
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:osprey-gang-watch"
    with Stubber(sfn) as stubber:
        stubber.add_client_error("start_execution", "ExecutionAlreadyExists", http_status_code=400)
        assert start_watch(arn, JobKey(Backend.BATCH, "job-1"), SETTINGS, "training", client=sfn) is False


def _record(status: str, **block: Any) -> JobRecord:
    return JobRecord(
        backend=Backend.EKS,
        native_id="ml/train",
        name="train",
        block=parse_block({"priority_derivation_profile": "training", **block}),
        status=status,
        status_time=datetime(2026, 12, 1, tzinfo=UTC),
        cluster="gpu",
    )


def test_registration_starts_a_watch_only_for_a_co_scheduled_job_not_over() -> None:
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:osprey-gang-watch"
    policy = CoScheduling(enabled=False, fallback=GangFallback.REQUEUE)
    with Stubber(sfn) as stubber:
        expected = {
            "stateMachineArn": arn,
            "name": execution_name(JobKey(Backend.EKS, "ml/train")),
            "input": json.dumps(
                {
                    "job": {"backend": "eks", "nativeId": "ml/train", "cluster": "gpu", "kind": "PyTorchJob"},
                    "policy": "training",
                    "settings": {
                        "timeoutSeconds": 300,
                        "requiredMinWorkers": 100,
                        "fallback": "requeue",
                        "maxRequeues": 5,
                    },
                }
            ),
        }
        stubber.add_response(
            "start_execution", {"executionArn": f"{arn}:x", "startDate": "2026-12-01"}, expected
        )
        gang = _record("PENDING", co_schedule=True, gang_timeout=300)
        assert register_gang(gang, policy, state_machine_arn=arn, client=sfn, kind="PyTorchJob") is True
        # Not co-scheduled, or over: no request at all (the Stubber would fail on one).
        assert register_gang(_record("PENDING"), policy, state_machine_arn=arn, client=sfn) is False
        finished = _record("SUCCEEDED", co_schedule=True)
        assert register_gang(finished, policy, state_machine_arn=arn, client=sfn) is False
        stubber.assert_no_pending_responses()


def test_the_watch_lambda_reads_the_mode_and_sends_no_fallback_in_shadow(
    handler_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import timedelta  # noqa: PLC0415

    from osprey_control.gang import Readiness  # noqa: PLC0415
    from tests.control.gang.test_watch import ScriptedBackend  # noqa: PLC0415

    # Given a deployment whose /osprey/config puts the policy "training" in shadow, and a gang that never forms
    ssm = boto3.client("ssm", region_name="us-east-1")
    mode = {"default": "enforce", "policies": {"training": "shadow"}}
    ssm.put_parameter(Name="/osprey/config", Value=json.dumps({"mode": mode}), Type="String")
    monkeypatch.setenv("OSPREY_CONFIG_PARAMETER", "/osprey/config")
    backend = ScriptedBackend(iter([Readiness(1, 4)] * 5))
    monkeypatch.setattr(gang_watch, "_gang", lambda job: backend)
    event = {
        "job": {"backend": "batch", "nativeId": "j1"},
        "policy": "training",
        "settings": {"timeoutSeconds": 120, "requiredMinWorkers": 100, "fallback": "fail"},
    }
    start = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    # When the watch steps at its start and after the timeout
    monkeypatch.setattr(gang_watch, "_now", lambda: start)
    gang_watch.handler(event, lambda_context("osprey-gang-watch", 256))
    monkeypatch.setattr(gang_watch, "_now", lambda: start + timedelta(seconds=130))
    result = gang_watch.handler(event, lambda_context("osprey-gang-watch", 256))
    # Then it decided to stop the job, recorded that it would have, and sent nothing to the backend
    assert (result["done"], result["action"], result["gang"]["phase"]) == (True, "stop", "failed")
    assert "shadow: would stop, nothing written" in result["gang"]["reason"]
    assert backend.actions == []
