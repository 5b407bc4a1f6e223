"""A simulated GPU fleet for ``osprey local``: jobs registered with Osprey, their backends, shifting GPU load.

Everything goes through AWS API clients for the embedded endpoint, so ``osprey local up`` can seed the fleet and
``osprey local cycle`` (another process) can publish the next minute of metrics: exactly the series the
collector reads for each job (:mod:`osprey.local.loads`).

Jobs: AWS Batch container jobs on a fair-share queue (one share identifier each, docs/design.md §6); SageMaker
training jobs queued through a Batch SAGEMAKER_TRAINING queue (service jobs) and created directly (tagged only);
and Kueue-managed Jobs on the EKS cluster's (fake) Kubernetes API: one plain, two co-scheduled with 4 pods each
(:mod:`osprey.local.gangs`). Two Batch jobs run under the example ``spot-aware-policy``, whose custom rule is
the demo's Lambda function (:mod:`osprey.local.rules`); EC2 sends one of them a rebalance recommendation,
handed to the deployed ingest function as its SQS batch (EventBridge cannot deliver in moto), which records
the spot risk the rule reads.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from osprey.local.gangs import GANG_TIMEOUT_SECONDS, GANG_WORKERS, kubernetes_gang
from osprey.local.kubernetes import LocalKubernetes
from osprey.local.loads import (
    EKS_NAMESPACE,
    GPUS_PER_NODE,
    FleetJob,
    SeededJob,
    sample_at,
    series_of,
)
from osprey_control.contract import ENABLED_KUBERNETES, ENABLED_TAG, KUBERNETES, OPT_IN, parse_block
from osprey_control.registry import Backend, JobObservation, JobRegistry, JobStatus, NodeKind, NodeRef
from osprey_control.wiring import CWAGENT_MEMORY_UTILIZATION_METRIC

__all__: list[str] = []

ClientFactory = Callable[[str], Any]
ENABLED_TAGS = {ENABLED_TAG: OPT_IN}
SPOT_WARNINGS = {
    "rebalance": "EC2 Instance Rebalance Recommendation",
    "interruption": "EC2 Spot Instance Interruption Warning",
}
SPOT_POLICY = "spot-aware-policy"  # policies/examples, applied by osprey.local.rules with the demo's rule
DEFAULT_JOBS: tuple[FleetJob, ...] = (
    FleetJob("resnet-batch", "batch", base_gpu=85, swing=10, phase=0.0),
    FleetJob("llama-batch", "batch", base_gpu=45, swing=40, phase=0.25),
    FleetJob("etl-batch", "batch", base_gpu=20, swing=15, phase=0.5),
    FleetJob("bert-sagemaker", "sagemaker-queued", base_gpu=60, swing=35, phase=0.75),
    FleetJob("gpt-sagemaker", "sagemaker", base_gpu=70, swing=25, phase=0.1),
    FleetJob("vit-eks", "eks", base_gpu=55, swing=30, phase=0.4),
    # Gangs: all 4 pods Ready in time (ready), 3 of 4 (times out, fallback serial).
    FleetJob("ddp-eks", "eks", base_gpu=80, swing=10, phase=0.6, gang_workers=GANG_WORKERS, gang_ready=4),
    FleetJob("moe-eks", "eks", base_gpu=30, swing=20, phase=0.9, gang_workers=GANG_WORKERS, gang_ready=3),
    # Spot capacity under the custom rule: the same load, one with a rebalance recommendation (risk 0.5).
    FleetJob("sweep-spot-batch", "batch", base_gpu=70, swing=15, phase=0.3, policy=SPOT_POLICY),
    FleetJob("ckpt-spot-batch", "batch", base_gpu=70, swing=15, phase=0.3, policy=SPOT_POLICY,
             spot_warning="rebalance"),
)  # fmt: skip
KUEUE_API = "kueue.x-k8s.io/v1beta1"


def batch_share(label: str) -> str:
    """The share identifier of the simulated Batch job ``label``: one of its own, in Osprey's namespace (the
    applier creates and changes only ``osprey-`` entries; a fleet job's label stands in for
    ``osprey.batch.own_share``'s random part, so ``osprey local status`` can find its weight)."""
    return f"osprey-job-{label.replace('-', '')}"


class SimulatedFleet:
    """Seeds and drives the simulated jobs through ``client(service)``."""

    def __init__(self, client: ClientFactory, table_name: str, shards: int) -> None:
        self.client = client
        self.registry = JobRegistry(table_name, client=client("dynamodb"), shards=shards)

    def _queues(self) -> tuple[str, str]:
        batch, iam = self.client("batch"), self.client("iam")
        role = iam.create_role(RoleName="osprey-local-batch", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        environment = batch.create_compute_environment(
            computeEnvironmentName="osprey-local-gpu", type="UNMANAGED", state="ENABLED", serviceRole=role
        )["computeEnvironmentArn"]
        policy = batch.create_scheduling_policy(
            name="osprey-local-fair-share",
            fairsharePolicy={"shareDecaySeconds": 3600, "shareDistribution": []},
            tags=ENABLED_TAGS,
        )["arn"]
        queue = batch.create_job_queue(
            jobQueueName="osprey-local-gpu",
            state="ENABLED",
            priority=1,
            schedulingPolicyArn=policy,
            computeEnvironmentOrder=[{"order": 1, "computeEnvironment": environment}],
        )["jobQueueArn"]
        batch.register_job_definition(
            jobDefinitionName="osprey-local-train",
            type="container",
            containerProperties={"image": "train:1", "vcpus": 1, "memory": 512},
        )
        sagemaker_queue = queue.replace(":job-queue/osprey-local-gpu", ":job-queue/osprey-local-sagemaker")
        return queue, sagemaker_queue

    @staticmethod
    def _kubernetes_job(kubernetes: LocalKubernetes, job: FleetJob) -> SeededJob:
        """A Kueue-managed batch/v1 Job with one pod; the cycle's EKS discovery registers it."""
        labels = {ENABLED_KUBERNETES: OPT_IN, KUBERNETES.key("priority_derivation_profile"): job.policy}
        created = kubernetes.add("batch/v1", "jobs", {
            "kind": "Job",
            "metadata": {"name": job.label, "namespace": EKS_NAMESPACE, "labels": labels},
            "spec": {"suspend": False, "parallelism": 1},
            "status": {"active": 1, "ready": 1, "startTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
        })  # fmt: skip
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job.label,
                 "uid": created["metadata"]["uid"], "controller": True}  # fmt: skip
        kubernetes.add(KUEUE_API, "workloads", {
            "kind": "Workload",
            # Kueue's labelKeysToCopy: ["osprey.aws/enabled"] (docs/eks.md): discovery lists Workloads by it.
            "metadata": {"name": f"job-{job.label}", "namespace": EKS_NAMESPACE, "ownerReferences": [owner],
                         "labels": {ENABLED_KUBERNETES: "true"}},
            "spec": {"queueName": "gpu", "podSets": [], "priority": 500},
            "status": {"conditions": [{"type": "Admitted", "status": "True",
                                       "lastTransitionTime": "2026-01-01T00:01:00Z"}]},
        })  # fmt: skip
        pod = f"{job.label}-0"
        kubernetes.add("v1", "pods", {
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": EKS_NAMESPACE,
                         "labels": {**labels, "batch.kubernetes.io/job-name": job.label}},
            # Running and Ready, as the Job's status.ready says: its gang (one worker) forms at once.
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        })  # fmt: skip
        return SeededJob(
            job.label, job.backend, f"{EKS_NAMESPACE}/{job.label}", pod, job.base_gpu, job.swing, job.phase,
            policy=job.policy,
        )  # fmt: skip

    def seed(
        self,
        jobs: Sequence[FleetJob] = DEFAULT_JOBS,
        kubernetes: LocalKubernetes | None = None,
        *,
        gang_timeout: int = GANG_TIMEOUT_SECONDS,
        ingest_function: str | None = None,
    ) -> list[SeededJob]:
        """Create the queues, submit every job to its backend and register it with Osprey (EKS jobs go to
        ``kubernetes``, where the cycle discovers them; without it they are left out; the gangs' watches are
        started by :func:`osprey.local.gangs.start_watches`). The spot warnings of the jobs that get one go
        to ``ingest_function`` (the deployment's ingest Lambda), which records the risk on their jobs."""
        warned = [job.label for job in jobs if job.spot_warning]
        if warned and ingest_function is None:
            raise ValueError(f"jobs {warned} get a spot warning: give the ingest function to deliver it")
        batch = self.client("batch")
        queue, sagemaker_queue = self._queues()
        now = datetime.now(UTC)
        seeded: list[SeededJob] = []
        for job in jobs:
            block = parse_block({"priority_derivation_profile": job.policy})
            if job.backend == "eks":
                if kubernetes is not None and job.gang_workers:
                    pod = kubernetes_gang(
                        kubernetes,
                        label=job.label,
                        namespace=EKS_NAMESPACE,
                        policy=job.policy,
                        workers=job.gang_workers,
                        ready=job.gang_ready,
                        timeout=gang_timeout,
                        kueue_api=KUEUE_API,
                    )
                    seeded.append(
                        SeededJob(job.label, job.backend, f"{EKS_NAMESPACE}/{job.label}", pod, job.base_gpu,
                                  job.swing, job.phase, job.gang_workers, job.gang_ready, job.policy)
                    )  # fmt: skip
                elif kubernetes is not None:
                    seeded.append(self._kubernetes_job(kubernetes, job))
                continue
            if job.backend == "batch":
                share = batch_share(job.label)
                native_id = batch.submit_job(
                    jobName=job.label,
                    jobQueue=queue,
                    jobDefinition="osprey-local-train",
                    shareIdentifier=share,
                    tags=ENABLED_TAGS,
                )["jobId"]
                node = f"i-{zlib.crc32(job.label.encode()):017x}"
                ref = NodeRef(node_id=node, kind=NodeKind.INSTANCE, instance_id=node, gpus=GPUS_PER_NODE)
                backend, job_queue, share_id = Backend.BATCH, queue, share
            elif job.backend == "sagemaker":
                native_id = job.label
                self.client("sagemaker").create_training_job(
                    TrainingJobName=job.label,
                    AlgorithmSpecification={"TrainingImage": "train:1", "TrainingInputMode": "File"},
                    RoleArn=self.client("iam").get_role(RoleName="osprey-local-batch")["Role"]["Arn"],
                    OutputDataConfig={"S3OutputPath": "s3://osprey-local/output"},
                    ResourceConfig={
                        "InstanceType": "ml.p4d.24xlarge",
                        "InstanceCount": 1,
                        "VolumeSizeInGB": 100,
                    },
                    StoppingCondition={"MaxRuntimeInSeconds": 86400},
                    Tags=[{"Key": key, "Value": value} for key, value in ENABLED_TAGS.items()],
                )
                node = f"{job.label}/algo-1"
                ref = NodeRef(node_id="algo-1", kind=NodeKind.HOST, gpus=GPUS_PER_NODE)
                backend, job_queue, share_id = Backend.SAGEMAKER, None, None
            else:
                native_id = batch.submit_service_job(
                    jobName=job.label,
                    jobQueue=sagemaker_queue,
                    serviceJobType="SAGEMAKER_TRAINING",
                    serviceRequestPayload="{}",
                    schedulingPriority=0,
                    tags=ENABLED_TAGS,
                )["jobId"]
                node = f"{job.label}/algo-1"
                ref = NodeRef(node_id="algo-1", kind=NodeKind.HOST, gpus=GPUS_PER_NODE)
                backend, job_queue, share_id = Backend.SAGEMAKER_QUEUED, sagemaker_queue, None
            self.registry.apply_observation(
                JobObservation(
                    backend=backend,
                    native_id=native_id,
                    name=job.label,
                    block=block,
                    status=JobStatus.RUNNING,
                    event_time=now,
                    submitted_at=now - timedelta(minutes=5),
                    nodes=(ref,),
                    job_queue=job_queue,
                    share_identifier=share_id,
                )
            )
            seeded.append(
                SeededJob(job.label, job.backend, native_id, node, job.base_gpu, job.swing, job.phase,
                          policy=job.policy)
            )  # fmt: skip
            if job.spot_warning and ingest_function is not None:
                self.warn_spot(ingest_function, node, job.spot_warning)
        return seeded

    def warn_spot(self, ingest_function: str, instance_id: str, kind: str) -> None:
        """EC2's spot warning for ``instance_id`` as EventBridge puts it on the ingest queue, handed to the
        deployed ingest function as an SQS batch of one (moto cannot deliver the event rule's target)."""
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": SPOT_WARNINGS[kind],
            "source": "aws.ec2",
            "account": "123456789012",
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": "us-east-1",
            "resources": [f"arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}"],
            "detail": {"instance-id": instance_id, "instance-action": "terminate"},
        }
        record = {
            "messageId": event["id"],
            "receiptHandle": "osprey-local",
            "body": json.dumps(event),
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "0"},
            "messageAttributes": {},
            "md5OfBody": "",
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:osprey-local-events",
            "awsRegion": "us-east-1",
        }
        response = self.client("lambda").invoke(
            FunctionName=ingest_function, Payload=json.dumps({"Records": [record]}).encode()
        )
        answer = json.loads(response["Payload"].read() or b"{}")
        if response.get("FunctionError") or answer.get("batchItemFailures"):
            raise RuntimeError(
                f"the ingest function did not record the spot warning for {instance_id}: {answer}"
            )

    def publish(self, jobs: Sequence[SeededJob], tick: int) -> dict[str, tuple[float, float | None]]:
        """Publish one minute of metrics for every job at ``tick`` (:func:`series_of`); returns the loads
        published: (GPU %, memory bandwidth %), the bandwidth None where the job publishes none."""
        cloudwatch = self.client("cloudwatch")
        stamp = datetime.now(UTC) - timedelta(seconds=30)
        loads: dict[str, tuple[float, float | None]] = {}
        for job in jobs:
            by_namespace: dict[str, list[dict[str, Any]]] = {}
            published = series_of(job, tick)
            for series in published:
                by_namespace.setdefault(series.namespace, []).append({
                    "MetricName": series.metric_name,
                    "Dimensions": [{"Name": name, "Value": value} for name, value in series.dimensions],
                    "Value": series.value,
                    "Timestamp": stamp,
                })  # fmt: skip
            for namespace, data in by_namespace.items():
                cloudwatch.put_metric_data(Namespace=namespace, MetricData=data)
            load = sample_at(job, tick)
            bandwidth = any(s.metric_name == CWAGENT_MEMORY_UTILIZATION_METRIC for s in published)
            loads[job.label] = (load.gpu, load.memory_bandwidth if bandwidth else None)
        return loads
