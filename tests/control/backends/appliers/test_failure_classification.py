"""Given an apply that fails, when the applier reports it, then whether the apply step retries it next cycle is
decided by the failure's class (osprey_control.errors): throttling, 5xx, no answer and a cluster still starting
are transient; a refused request, a refused credential and a bug are not."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from osprey_control.backends import Outcome, PriorityChange
from osprey_control.backends.actuation import failure
from osprey_control.backends.eks import EksApplier, UnauthorizedError
from osprey_control.contract import parse_block
from osprey_control.errors import TransientError
from osprey_control.registry import Backend, JobRecord, JobStatus

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _change(backend: Backend, cluster: str | None = None) -> PriorityChange:
    record = JobRecord(
        backend=backend,
        native_id="ml/train" if backend is Backend.EKS else "train",
        name="train",
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=JobStatus.RUNNING,
        status_time=NOW,
        applied_priority=50,
        cluster=cluster,
    )
    return PriorityChange(record, 70)


def _client_error(code: str, status: int) -> ClientError:
    response: Any = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "DescribeCluster")


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (_client_error("ThrottlingException", 400), True),
        (_client_error("ServiceUnavailableException", 503), True),
        (EndpointConnectionError(endpoint_url="https://eks.us-east-1.amazonaws.com"), True),
        (TimeoutError("no answer"), True),
        (TransientError("EKS cluster 'gpu' has no API endpoint yet (status CREATING)"), True),
        (_client_error("ResourceNotFoundException", 404), False),
        (_client_error("AccessDeniedException", 403), False),
        (UnauthorizedError("GET", "/apis", 403, "Forbidden", "no access entry"), False),
        (ValueError("a bug"), False),
    ],
)
def test_a_cluster_that_cannot_be_reached_fails_its_jobs_transiently_or_not_by_class(
    error: Exception, transient: bool
) -> None:
    # Given an EKS cluster whose connection fails with ``error``
    def connect(cluster: str) -> Any:
        raise error

    # When its job's priority is applied
    [result] = EksApplier(connect).apply([_change(Backend.EKS, cluster="gpu")]).results
    # Then the job fails, retried next cycle exactly when the failure is transient
    assert (result.outcome, result.transient) == (Outcome.FAILED, transient)


@pytest.mark.parametrize(
    ("error", "transient", "hint"),
    [
        (_client_error("ThrottlingException", 400), True, "retried next cycle"),
        (_client_error("ValidationException", 400), False, "fix the cause"),
        (KeyError("TrainingJobArn"), False, "fix the cause"),
    ],
)
def test_a_backend_failure_says_whether_it_is_retried(error: Exception, transient: bool, hint: str) -> None:
    result = failure(_change(Backend.SAGEMAKER), error, "AddTags")
    assert result.transient is transient
    assert hint in result.reason
