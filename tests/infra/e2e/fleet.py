"""A small GPU fleet for the end-to-end cycle test: jobs in the registry, their backends, their metrics.

Each job exists where the control plane will look for it: a registry record (as the ingest Lambda would have
written it), the backend resource the apply step writes to (a Batch container job on a fair-share queue in moto,
or a Batch service job in :class:`osprey.local.service_jobs.ServiceJobs`), and GPU metrics in CloudWatch
published a minute ago (CWAgent per-instance rollup, or SageMaker's per-host sum over GPUs).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from osprey.local.service_jobs import ServiceJobs
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus, NodeKind, NodeRef
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation

__all__ = ["ENABLED_TAGS", "Fleet"]

ENABLED_TAGS = {"osprey:enabled": "true"}
GPUS_PER_HOST = 8


@dataclass
class Fleet:
    registry: JobRegistry
    batch: Any
    cloudwatch: Any
    service_jobs: ServiceJobs
    fair_share_queue: str = ""
    scheduling_policy: str = ""
    sagemaker_queue: str = "arn:aws:batch:us-east-1:123456789012:job-queue/osprey-sagemaker"
    keys: dict[str, JobKey] = field(default_factory=dict)

    def create_queues(self, iam: Any) -> None:
        """A fair-share job queue (with one non-Osprey share that must survive every update)."""
        role = iam.create_role(RoleName="batch-service", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        environment = self.batch.create_compute_environment(
            computeEnvironmentName="gpu", type="UNMANAGED", state="ENABLED", serviceRole=role
        )["computeEnvironmentArn"]
        self.scheduling_policy = self.batch.create_scheduling_policy(
            name="osprey-fair-share",
            fairsharePolicy={
                "shareDecaySeconds": 3600,
                "shareDistribution": [{"shareIdentifier": "analytics", "weightFactor": 0.5}],
            },
            tags=ENABLED_TAGS,
        )["arn"]
        self.fair_share_queue = self.batch.create_job_queue(
            jobQueueName="osprey-gpu",
            state="ENABLED",
            priority=1,
            schedulingPolicyArn=self.scheduling_policy,
            computeEnvironmentOrder=[{"order": 1, "computeEnvironment": environment}],
        )["jobQueueArn"]
        self.batch.register_job_definition(
            jobDefinitionName="train",
            type="container",
            containerProperties={"image": "train:1", "vcpus": 1, "memory": 512},
        )

    def _register(self, observation: JobObservation, label: str) -> JobKey:
        self.registry.apply_observation(observation)
        self.keys[label] = observation.key
        return observation.key

    def batch_job(
        self, label: str, *, gpu: float, memory_bandwidth: float, policy: str = "training-policy"
    ) -> JobKey:
        """A Batch container job on one instance, with its own share identifier (DESIGN §6)."""
        now = datetime.now(UTC)
        share = f"osprey-job-{label}"
        job_id = self.batch.submit_job(
            jobName=label,
            jobQueue=self.fair_share_queue,
            jobDefinition="train",
            shareIdentifier=share,
            tags=ENABLED_TAGS,
        )["jobId"]
        instance = f"i-{zlib.crc32(label.encode()):017x}"
        self._put(
            "CWAgent",
            [{"Name": "InstanceId", "Value": instance}],
            {"nvidia_smi_utilization_gpu": gpu, "nvidia_smi_utilization_memory": memory_bandwidth},
        )
        return self._register(
            JobObservation(
                backend=Backend.BATCH,
                native_id=job_id,
                name=label,
                block=parse_block({"priority_derivation_profile": policy}),
                status=JobStatus.RUNNING,
                event_time=now - timedelta(minutes=10),
                submitted_at=now - timedelta(minutes=20),
                nodes=(NodeRef(node_id=instance, kind=NodeKind.INSTANCE, instance_id=instance, gpus=8),),
                job_queue=self.fair_share_queue,
                share_identifier=share,
            ),
            label,
        )

    def queued_sagemaker_job(self, label: str, *, gpu: float, policy: str = "training-policy") -> JobKey:
        """A SageMaker training job submitted through a SAGEMAKER_TRAINING queue (a Batch service job)."""
        now = datetime.now(UTC)
        job = self.service_jobs.submit(
            job_name=label, job_queue=self.sagemaker_queue, tags=ENABLED_TAGS, scheduling_priority=0
        )
        # SageMaker publishes the sum over the host's GPUs; the collector divides by the GPU count.
        self._put(
            "/aws/sagemaker/TrainingJobs",
            [{"Name": "Host", "Value": f"{label}/algo-1"}],
            {"GPUUtilization": gpu * GPUS_PER_HOST},
        )
        return self._register(
            JobObservation(
                backend=Backend.SAGEMAKER_QUEUED,
                native_id=job.job_id,
                name=label,
                block=parse_block({"priority_derivation_profile": policy}),
                status=JobStatus.RUNNING,
                event_time=now - timedelta(minutes=10),
                submitted_at=now - timedelta(minutes=20),
                nodes=(NodeRef(node_id="algo-1", kind=NodeKind.HOST, gpus=GPUS_PER_HOST),),
                job_queue=self.sagemaker_queue,
            ),
            label,
        )

    def direct_sagemaker_job(self, sagemaker: Any, label: str, *, gpu: float) -> JobKey:
        """A SageMaker training job created directly: Osprey can only tag it (DESIGN §6)."""
        now = datetime.now(UTC)
        arn = sagemaker.create_training_job(
            TrainingJobName=label,
            AlgorithmSpecification={"TrainingImage": "train:1", "TrainingInputMode": "File"},
            RoleArn="arn:aws:iam::123456789012:role/sagemaker",
            OutputDataConfig={"S3OutputPath": "s3://osprey-e2e/output"},
            ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 100},
            StoppingCondition={"MaxRuntimeInSeconds": 3600},
            Tags=[{"Key": key, "Value": value} for key, value in ENABLED_TAGS.items()],
        )["TrainingJobArn"]
        self._put(
            "/aws/sagemaker/TrainingJobs",
            [{"Name": "Host", "Value": f"{label}/algo-1"}],
            {"GPUUtilization": gpu * GPUS_PER_HOST},
        )
        return self._register(
            JobObservation(
                backend=Backend.SAGEMAKER,
                native_id=label,
                name=label,
                arn=arn,
                block=parse_block({"priority_derivation_profile": "training-policy"}),
                status=JobStatus.RUNNING,
                event_time=now - timedelta(minutes=10),
                submitted_at=now - timedelta(minutes=20),
                nodes=(NodeRef(node_id="algo-1", kind=NodeKind.HOST, gpus=GPUS_PER_HOST),),
            ),
            label,
        )

    def _put(self, namespace: str, dimensions: list[dict[str, str]], values: dict[str, float]) -> None:
        stamp = datetime.now(UTC) - timedelta(minutes=1)
        self.cloudwatch.put_metric_data(
            Namespace=namespace,
            MetricData=[
                {"MetricName": name, "Dimensions": dimensions, "Value": value, "Timestamp": stamp}
                for name, value in values.items()
            ],
        )

    def record(self, label: str) -> JobRecord:
        record = self.registry.get(self.keys[label])
        assert record is not None, f"{label} left the registry"
        return record

    def decision(self, label: str) -> dict[str, Any]:
        decision = self.record(label).last_decision
        assert decision is not None, f"{label} was never derived"
        return decision

    def share_weights(self) -> dict[str, float]:
        [policy] = self.batch.describe_scheduling_policies(arns=[self.scheduling_policy])[
            "schedulingPolicies"
        ]
        return {
            entry["shareIdentifier"]: entry["weightFactor"]
            for entry in policy["fairsharePolicy"]["shareDistribution"]
        }
