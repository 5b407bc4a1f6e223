"""Gangs on AWS Batch: readiness of a job (multi-node parallel: its node jobs ``jobId#0 .. jobId#N-1``
RUNNING; a single-node job is 1/1 when RUNNING) and the ``fail`` fallback (TerminateJob, only on a job tagged
``osprey:enabled=true``). ``requeue`` is impossible (Batch has no suspend; a resubmission is a new job) and is
applied as ``serial``.
"""

from __future__ import annotations

from typing import Any

from osprey_control.aws import client_for
from osprey_control.backends.actuation import is_enabled
from osprey_control.backends.aws_batch import TERMINAL_STATUSES
from osprey_control.contract import ENABLED_TAG
from osprey_control.gang import STOP_REASON, NoRequeue, NotOptedInError, Readiness

__all__ = ["BatchGang", "batch_readiness"]

_DESCRIBE_JOBS_MAX = 100  # DescribeJobs takes at most 100 job ids per call


def batch_readiness(job_id: str, *, client: Any = None) -> Readiness:
    """An AWS Batch job: multi-node parallel node jobs RUNNING, or the job itself when single-node."""
    batch = client_for("batch", client)
    jobs = batch.describe_jobs(jobs=[job_id]).get("jobs") or []
    if not jobs:
        return Readiness(0, 0, finished=True, detail="job not found")
    job = jobs[0]
    status = job.get("status", "")
    if status in TERMINAL_STATUSES:
        return Readiness(0, 0, finished=True, detail=f"job {status}")
    nodes = int((job.get("nodeProperties") or {}).get("numNodes", 0))
    if nodes <= 1:
        return Readiness(1 if status == "RUNNING" else 0, 1, detail=f"job {status}")
    node_ids = [f"{job_id}#{index}" for index in range(nodes)]
    running = 0
    for start in range(0, nodes, _DESCRIBE_JOBS_MAX):
        page = batch.describe_jobs(jobs=node_ids[start : start + _DESCRIBE_JOBS_MAX]).get("jobs") or []
        running += sum(1 for node in page if node.get("status") == "RUNNING")
    return Readiness(running, nodes, detail=f"{running}/{nodes} node jobs RUNNING")


class BatchGang(NoRequeue):
    def __init__(self, job_id: str, *, client: Any = None) -> None:
        self._job_id = job_id
        self._client = client

    def readiness(self) -> Readiness:
        self._client = client_for("batch", self._client)
        return batch_readiness(self._job_id, client=self._client)

    def stop(self) -> None:
        batch = self._client = client_for("batch", self._client)
        jobs = batch.describe_jobs(jobs=[self._job_id]).get("jobs") or []
        if not jobs or not is_enabled(jobs[0].get("tags") or {}):
            raise NotOptedInError(f"Batch job {self._job_id} is not tagged {ENABLED_TAG}=true")
        batch.terminate_job(jobId=self._job_id, reason=STOP_REASON)
