"""AWS Batch service jobs (SageMaker Training through a SAGEMAKER_TRAINING queue) for moto, which lacks them.

moto 5.2 has no ``SubmitServiceJob`` / ``DescribeServiceJob`` / ``UpdateServiceJob`` / ``ListServiceJobs``
(docs/design.md §9). :class:`ServiceJobs` keeps service jobs in memory and answers those four operations for any boto3
client in the process while :meth:`ServiceJobs.installed` is active, by sitting in front of moto's request
dispatcher: the control plane's apply Lambda (running in-process, see :mod:`osprey.local.lambdas`) then reads and
writes them through its ordinary boto3 client. botocore has already validated every request against the real
service model before it gets here. ``updates`` records each ``UpdateServiceJob`` request in order.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__: list[str] = []

Response = tuple[int, dict[str, str], str]
_TERMINAL = frozenset({"SUCCEEDED", "FAILED"})


@dataclass
class ServiceJob:
    job_id: str
    job_name: str
    job_queue: str
    job_arn: str
    scheduling_priority: int
    tags: dict[str, str]
    service_job_type: str = "SAGEMAKER_TRAINING"
    service_request_payload: str = "{}"
    share_identifier: str | None = None
    status: str = "RUNNABLE"
    created_at: int = field(default_factory=lambda: int(time.time() * 1000))

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "jobArn": self.job_arn,
            "jobId": self.job_id,
            "jobName": self.job_name,
            "jobQueue": self.job_queue,
            "serviceJobType": self.service_job_type,
            "serviceRequestPayload": self.service_request_payload,
            "schedulingPriority": self.scheduling_priority,
            "status": self.status,
            "createdAt": self.created_at,
            "startedAt": self.created_at,
            "isTerminated": self.status in _TERMINAL,
            "tags": dict(self.tags),
        }
        if self.share_identifier:
            described["shareIdentifier"] = self.share_identifier
        return described


def _error(status: int, code: str, message: str) -> Response:
    return status, {"x-amzn-ErrorType": code}, json.dumps({"__type": code, "message": message})


class ServiceJobs:
    """In-memory Batch service jobs, served to boto3 in this process (see the module docstring)."""

    def __init__(self, region: str = "us-east-1", account: str = "123456789012") -> None:
        self.region = region
        self.account = account
        self.jobs: dict[str, ServiceJob] = {}
        self.updates: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._operations: dict[str, Callable[[dict[str, Any]], Response]] = {
            "/v1/submitservicejob": self._submit,
            "/v1/describeservicejob": self._describe,
            "/v1/updateservicejob": self._update,
            "/v1/listservicejobs": self._list,
        }

    def submit(
        self,
        *,
        job_name: str,
        job_queue: str,
        tags: Mapping[str, str] | None = None,
        scheduling_priority: int = 0,
        share_identifier: str | None = None,
        service_request_payload: str = "{}",
    ) -> ServiceJob:
        """Add a service job directly (what ``SubmitServiceJob`` does); returns it."""
        job_id = str(uuid.uuid4())
        job = ServiceJob(
            job_id=job_id,
            job_name=job_name,
            job_queue=job_queue,
            job_arn=f"arn:aws:batch:{self.region}:{self.account}:service-job/{job_id}",
            scheduling_priority=scheduling_priority,
            tags=dict(tags or {}),
            share_identifier=share_identifier,
            service_request_payload=service_request_payload,
        )
        with self._lock:
            self.jobs[job_id] = job
        return job

    def handles(self, method: str, path: str) -> bool:
        """Whether ``path`` is a service-job operation (the paths are Batch's alone, so a server can route by
        path; in-process requests are also checked for the Batch host)."""
        return method == "POST" and path.rstrip("/") in self._operations

    def handle_path(self, path: str, body: bytes | str | None) -> Response:
        text = body.decode() if isinstance(body, bytes) else (body or "")
        return self._operations[path.rstrip("/")](json.loads(text) if text.strip() else {})

    def handle(self, method: str, url: str, body: bytes | str | None) -> Response | None:
        """The response to a Batch service-job request, or None for any other request."""
        parts = urlsplit(url)
        if not self.handles(method, parts.path) or not parts.netloc.startswith("batch."):
            return None
        return self.handle_path(parts.path, body)

    def _submit(self, request: dict[str, Any]) -> Response:
        job = self.submit(
            job_name=request["jobName"],
            job_queue=request["jobQueue"],
            tags=request.get("tags"),
            scheduling_priority=int(request.get("schedulingPriority", 0)),
            share_identifier=request.get("shareIdentifier"),
            service_request_payload=request.get("serviceRequestPayload", "{}"),
        )
        return 200, {}, json.dumps({"jobArn": job.job_arn, "jobName": job.job_name, "jobId": job.job_id})

    def _job(self, request: dict[str, Any]) -> ServiceJob | None:
        with self._lock:
            return self.jobs.get(str(request.get("jobId")))

    def _describe(self, request: dict[str, Any]) -> Response:
        job = self._job(request)
        if job is None:
            return _error(400, "ClientException", f"Service job {request.get('jobId')} not found")
        return 200, {}, json.dumps(job.describe())

    def _update(self, request: dict[str, Any]) -> Response:
        job = self._job(request)
        if job is None:
            return _error(400, "ClientException", f"Service job {request.get('jobId')} not found")
        if job.status in _TERMINAL:
            return _error(400, "ClientException", f"Service job {job.job_id} is {job.status}")
        with self._lock:
            job.scheduling_priority = int(request["schedulingPriority"])
            self.updates.append(dict(request))
        return 200, {}, json.dumps({"jobArn": job.job_arn, "jobName": job.job_name, "jobId": job.job_id})

    def _list(self, request: dict[str, Any]) -> Response:
        with self._lock:
            jobs = [
                job
                for job in self.jobs.values()
                if request.get("jobQueue") in (None, job.job_queue)
                and request.get("jobStatus") in (None, job.status)
            ]
        summaries = [
            {
                key: value
                for key, value in job.describe().items()
                if key not in {"tags", "serviceRequestPayload"}
            }
            for job in jobs
        ]
        return 200, {}, json.dumps({"jobSummaryList": summaries})

    @contextmanager
    def installed(self) -> Iterator[ServiceJobs]:
        """Answer service-job requests in front of moto's in-process dispatcher (``mock_aws``)."""
        from moto.core.models import botocore_stubber  # noqa: PLC0415 - moto is a dev/local dependency

        shadowed = vars(botocore_stubber).get("process_request")
        original = botocore_stubber.process_request

        def process_request(request: Any) -> Any:
            answered = self.handle(str(request.method), str(request.url), request.body)
            return answered if answered is not None else original(request)

        botocore_stubber.process_request = process_request  # type: ignore[method-assign]
        try:
            yield self
        finally:
            if shadowed is None:
                del botocore_stubber.process_request
            else:
                botocore_stubber.process_request = shadowed  # type: ignore[method-assign]
