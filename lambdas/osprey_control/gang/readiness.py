"""How many of a gang's workers are up, per backend (docs/design.md §7). Each reader takes its client.

- SageMaker direct: every host is up once ``SecondaryStatus`` reaches ``Training`` (SageMaker starts a job's
  hosts together and reports no per-host state before that), so readiness is all-or-nothing.
- SageMaker through AWS Batch: the service job's latest attempt names its ``TrainingJobArn``; then as above.
- AWS Batch multi-node parallel: node jobs ``jobId#0 .. jobId#N-1`` RUNNING; a single-node job is 1/1 when
  RUNNING.
- EKS: pods Ready (the Ready condition True), see :mod:`osprey_control.gang.kubernetes`.
"""

from __future__ import annotations

import json
from typing import Any

from osprey_control.aws import client_for
from osprey_control.gang.decision import Readiness

__all__ = ["batch_readiness", "sagemaker_queued_readiness", "sagemaker_readiness"]

_SAGEMAKER_OVER = frozenset({"Completed", "Failed", "Stopping", "Stopped"})
# SecondaryStatus values at or after the point where every host runs the training script.
_SAGEMAKER_TRAINING = frozenset({"Training", "Uploading", "Completed"})
_BATCH_OVER = frozenset({"SUCCEEDED", "FAILED"})
_DESCRIBE_JOBS_MAX = 100  # DescribeJobs takes at most 100 job ids per call


def _instance_count(resource_config: dict[str, Any]) -> int:
    groups = resource_config.get("InstanceGroups") or []
    if groups:  # heterogeneous clusters list their hosts per instance group
        return sum(int(group.get("InstanceCount", 0)) for group in groups)
    return int(resource_config.get("InstanceCount", 0))


def sagemaker_readiness(training_job_name: str, *, client: Any = None) -> Readiness:
    job = client_for("sagemaker", client).describe_training_job(TrainingJobName=training_job_name)
    hosts = _instance_count(job.get("ResourceConfig") or {})
    status, secondary = job.get("TrainingJobStatus", ""), job.get("SecondaryStatus", "")
    if status in _SAGEMAKER_OVER:
        return Readiness(0, hosts, finished=True, detail=f"training job {status}")
    ready = hosts if secondary in _SAGEMAKER_TRAINING else 0
    return Readiness(ready, hosts, detail=f"SecondaryStatus {secondary}")


def _training_job_name(arn: str) -> str:
    # arn:aws:sagemaker:<region>:<account>:training-job/<name>
    return arn.rsplit("/", 1)[-1]


def _payload_hosts(payload: str | None) -> int:
    try:
        request = json.loads(payload or "{}")
    except ValueError:
        return 0
    config = request.get("ResourceConfig") if isinstance(request, dict) else None
    return _instance_count(config) if isinstance(config, dict) else 0


def sagemaker_queued_readiness(
    service_job_id: str, *, batch_client: Any = None, sagemaker_client: Any = None
) -> Readiness:
    """A SageMaker training job submitted through an AWS Batch service job queue."""
    job = client_for("batch", batch_client).describe_service_job(jobId=service_job_id)
    requested = _payload_hosts(job.get("serviceRequestPayload"))
    status = job.get("status", "")
    if status in _BATCH_OVER or job.get("isTerminated"):
        return Readiness(0, requested, finished=True, detail=f"service job {status}")
    resource = (job.get("latestAttempt") or {}).get("serviceResourceId") or {}
    if resource.get("name") != "TrainingJobArn" or not resource.get("value"):
        return Readiness(0, requested, detail=f"service job {status}, no training job yet")
    return sagemaker_readiness(_training_job_name(str(resource["value"])), client=sagemaker_client)


def batch_readiness(job_id: str, *, client: Any = None) -> Readiness:
    """An AWS Batch job: multi-node parallel node jobs RUNNING, or the job itself when single-node."""
    batch = client_for("batch", client)
    jobs = batch.describe_jobs(jobs=[job_id]).get("jobs") or []
    if not jobs:
        return Readiness(0, 0, finished=True, detail="job not found")
    job = jobs[0]
    status = job.get("status", "")
    if status in _BATCH_OVER:
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
