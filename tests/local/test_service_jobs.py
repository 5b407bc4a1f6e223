"""Batch service jobs for moto: boto3 clients in the process can submit, describe, update and list them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from osprey.local.service_jobs import ServiceJobs

QUEUE = "arn:aws:batch:us-east-1:123456789012:job-queue/sagemaker"


@pytest.fixture
def batch() -> Iterator[tuple[Any, ServiceJobs]]:
    with mock_aws(), ServiceJobs().installed() as jobs:
        yield boto3.client("batch", region_name="us-east-1"), jobs


def test_a_submitted_service_job_can_be_described_reprioritised_and_listed(
    batch: tuple[Any, ServiceJobs],
) -> None:
    client, jobs = batch
    # Given a SageMaker training job submitted through a SAGEMAKER_TRAINING queue
    submitted = client.submit_service_job(
        jobName="bert",
        jobQueue=QUEUE,
        serviceJobType="SAGEMAKER_TRAINING",
        serviceRequestPayload="{}",
        schedulingPriority=10,
        tags={"osprey:enabled": "true"},
    )
    # When its priority is updated
    client.update_service_job(jobId=submitted["jobId"], schedulingPriority=5999)
    # Then describe shows the new priority and the tags, and list finds it on its queue
    described = client.describe_service_job(jobId=submitted["jobId"])
    assert (described["schedulingPriority"], described["tags"], described["status"]) == (
        5999,
        {"osprey:enabled": "true"},
        "RUNNABLE",
    )
    assert [job["jobName"] for job in client.list_service_jobs(jobQueue=QUEUE)["jobSummaryList"]] == ["bert"]
    assert jobs.updates == [{"jobId": submitted["jobId"], "schedulingPriority": 5999}]
    # ... while moto still answers the Batch operations it implements
    assert client.describe_job_queues()["jobQueues"] == []


def test_an_unknown_or_finished_service_job_is_a_client_error(batch: tuple[Any, ServiceJobs]) -> None:
    client, jobs = batch
    with pytest.raises(ClientError, match="Service job nope not found"):
        client.describe_service_job(jobId="nope")
    finished = jobs.submit(job_name="done", job_queue=QUEUE)
    finished.status = "SUCCEEDED"
    with pytest.raises(ClientError, match="is SUCCEEDED"):
        client.update_service_job(jobId=finished.job_id, schedulingPriority=1)
    assert jobs.updates == []


def _plain_moto_refusal() -> type[Exception]:
    """What moto itself raises for DescribeServiceJob, which it does not implement: a ClientError (a 404) up
    to moto 5.2.5, NotImplementedError from 5.2.6, whose router knows the operation."""
    with mock_aws():
        client = boto3.client("batch", region_name="us-east-1")
        try:
            client.describe_service_job(jobId="anything")
        except (ClientError, NotImplementedError) as error:
            return type(error)
    raise AssertionError("moto answered DescribeServiceJob by itself; this fake may no longer be needed")


def test_outside_the_block_moto_answers_again_without_service_jobs() -> None:
    refusal = _plain_moto_refusal()
    with mock_aws():
        with ServiceJobs().installed():
            pass
        client = boto3.client("batch", region_name="us-east-1")
        # Then the call reaches moto as if the fake had never been installed
        with pytest.raises(refusal):
            client.describe_service_job(jobId="anything")
