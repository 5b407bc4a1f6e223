"""Issue 28, item 2 on SageMaker: a service job (UpdateServiceJob) or a training job (AddTags) is written only
when its *live* tags opt it in, whatever the registry holds, and the one tag Osprey writes is its own ``osprey:``
key, the others left as they were. Service jobs through botocore's Stubber (moto lacks them): a call the test
did not queue fails the test, so "no write" is checked by the service model itself."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from osprey_control.backends import DERIVED_PRIORITY_TAG, NOT_ENABLED, Outcome, PriorityChange
from osprey_control.backends.sagemaker import TrainingJobTagApplier
from osprey_control.backends.sagemaker_queue import ServiceJobApplier
from osprey_control.registry.model import Backend
from tests.control.backends.appliers.test_sagemaker_appliers import service_job, training_job
from tests.control.metrics.helpers import host, record

ENABLED = {"osprey:enabled": "true", "osprey:policy": "training-policy"}


def _queued(job_id: str) -> Any:
    # The registry says the job opted in (its tags at ingest); only the live tags decide the write.
    return record(Backend.SAGEMAKER_QUEUED, job_id, [host("algo-1")], applied_priority=50, tags=ENABLED)


def test_a_service_job_whose_live_tags_do_not_opt_it_in_gets_no_update_service_job() -> None:
    client = boto3.client("batch", region_name="us-east-1")
    live = {
        "a": {"team": "vision"},
        "b": {"osprey:enabled": "false"},
        "c": {"osprey:policy": "training-policy"},
    }
    with Stubber(client) as stubber:
        for job_id, tags in live.items():
            stubber.add_response(
                "describe_service_job", service_job(job_id, priority=100, tags=tags), {"jobId": job_id}
            )
        # When the applier is given the three (and no UpdateServiceJob is queued: one would fail the test)
        report = ServiceJobApplier(client).apply([PriorityChange(_queued(job_id), 90) for job_id in live])
        stubber.assert_no_pending_responses()
    # Then each is skipped with the reason, and nothing was written
    assert report.writes == 0
    assert [(result.outcome, result.reason) for result in report.results] == [
        (Outcome.SKIPPED, NOT_ENABLED)
    ] * 3
    assert "osprey:enabled=true" in NOT_ENABLED


@pytest.fixture
def sagemaker() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sagemaker", region_name="us-east-1")


def test_the_one_tag_osprey_writes_is_its_own_and_the_others_stay(sagemaker: Any) -> None:
    # Given an opted-in training job carrying a team's and a cost tag, and a job that dropped its opt-in tag
    owned = training_job(sagemaker, "owned", {**ENABLED, "team": "vision", "cost-center": "42"})
    dropped = training_job(sagemaker, "dropped", {"team": "vision"})
    sent: list[dict[str, Any]] = []
    sagemaker.meta.events.register(
        "provide-client-params.sagemaker.AddTags", lambda params, **_: sent.append(params)
    )
    changes = [
        PriorityChange(
            record(Backend.SAGEMAKER, "owned", [], arn=owned, applied_priority=50, tags=ENABLED), 70
        ),
        PriorityChange(
            record(Backend.SAGEMAKER, "dropped", [], arn=dropped, applied_priority=50, tags=ENABLED), 70
        ),
    ]
    # When applied
    report = TrainingJobTagApplier(sagemaker).apply(changes)
    # Then one AddTags was sent, to the opted-in job, carrying only osprey:derived-priority
    assert [(request["ResourceArn"], request["Tags"]) for request in sent] == [
        (owned, [{"Key": DERIVED_PRIORITY_TAG, "Value": "70"}])
    ]
    assert all(tag["Key"].startswith("osprey:") for request in sent for tag in request["Tags"])
    tags = {tag["Key"]: tag["Value"] for tag in sagemaker.list_tags(ResourceArn=owned)["Tags"]}
    assert tags == {**ENABLED, "team": "vision", "cost-center": "42", DERIVED_PRIORITY_TAG: "70"}
    # And the job without its opt-in tag is skipped with the reason
    assert report.by_job()[changes[1].record.key].reason == NOT_ENABLED


def test_a_record_whose_arn_names_another_training_job_tags_nothing(sagemaker: Any) -> None:
    # Given an opted-in training job "theirs", and a record of job "mine" whose ARN names "theirs"
    theirs = training_job(sagemaker, "theirs", ENABLED)
    training_job(sagemaker, "mine", ENABLED)
    change = PriorityChange(
        record(Backend.SAGEMAKER, "mine", [], arn=theirs, applied_priority=50, tags=ENABLED), 90
    )
    # When applied
    report = TrainingJobTagApplier(sagemaker).apply([change])
    # Then "theirs" is not tagged with mine's priority, and the job fails saying why
    tags = {tag["Key"]: tag["Value"] for tag in sagemaker.list_tags(ResourceArn=theirs)["Tags"]}
    assert DERIVED_PRIORITY_TAG not in tags
    [result] = report.results
    assert result.outcome is Outcome.FAILED
    assert "names training job 'theirs', not 'mine'" in result.reason
    assert report.writes == 0
