"""Given the statuses AWS reports for a job, when mapped by the job's backend, then each is Osprey's status of
the tables in backends/sagemaker/events.py and backends/aws_batch.py (and docs/registry.md). Whole events are
parsed in tests/control/ingest."""

from __future__ import annotations

import pytest

from osprey_control.backends.aws_batch import batch_status
from osprey_control.backends.sagemaker.events import sagemaker_status
from osprey_control.backends.sagemaker_queue.events import service_job_status
from osprey_control.registry import JobStatus


@pytest.mark.parametrize(
    ("primary", "secondary", "expected"),
    [
        ("InProgress", "Pending", JobStatus.PENDING),
        ("InProgress", "Starting", JobStatus.STARTING),
        ("InProgress", "Downloading", JobStatus.STARTING),
        ("InProgress", "Interrupted", JobStatus.STARTING),
        ("InProgress", "Training", JobStatus.RUNNING),
        ("InProgress", "Uploading", JobStatus.RUNNING),
        ("Stopping", "Stopping", JobStatus.RUNNING),
        ("Completed", "Completed", JobStatus.SUCCEEDED),
        ("Failed", "Failed", JobStatus.FAILED),
        ("Stopped", "MaxRuntimeExceeded", JobStatus.STOPPED),
        ("InProgress", "SomethingNew", JobStatus.STARTING),
        ("InProgress", None, JobStatus.STARTING),
    ],
)
def test_sagemaker_status_table(primary: str, secondary: str | None, expected: JobStatus) -> None:
    assert sagemaker_status(primary, secondary) is expected


@pytest.mark.parametrize(
    ("status", "service", "expected"),
    [
        ("SUBMITTED", False, JobStatus.PENDING),
        ("RUNNABLE", False, JobStatus.PENDING),
        ("STARTING", False, JobStatus.STARTING),
        ("RUNNING", False, JobStatus.RUNNING),
        ("SUCCEEDED", False, JobStatus.SUCCEEDED),
        ("FAILED", False, JobStatus.FAILED),
        ("SCHEDULED", True, JobStatus.STARTING),
    ],
)
def test_batch_status_table(status: str, service: bool, expected: JobStatus) -> None:
    # A service job's statuses are a Batch job's and SCHEDULED (osprey_control.backends.sagemaker_queue).
    assert (service_job_status(status) if service else batch_status(status)) is expected
