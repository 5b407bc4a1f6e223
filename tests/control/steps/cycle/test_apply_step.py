"""Given a derived cycle, when the apply step runs, then each pending job is written on its backend, the
registry records what was applied (or why not), and a backend that fails (an unreachable EKS cluster) fails
only its own jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from osprey_control.backends import DERIVED_PRIORITY_TAG, Outcome
from osprey_control.backends.eks import EksApplier
from osprey_control.backends.sagemaker import TrainingJobTagApplier
from osprey_control.contract import parse_block, tag_list, to_tags
from osprey_control.policy_store import PolicySource
from osprey_control.registry import Backend, JobKey, JobStatus, NodeKind, NodeRef
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.derive import derive_within
from tests.control.steps.cycle.conftest import NOW

BLOCK = parse_block({"priority_derivation_profile": "training-policy"})


def sagemaker_job(aws: dict[str, Any], name: str, enabled: bool = True) -> str:
    import boto3  # noqa: PLC0415 - inside the fixture's moto context

    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    tags = tag_list(to_tags(BLOCK)) if enabled else [{"Key": "team", "Value": "vision"}]
    arn: str = sagemaker.create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1",
            "TrainingInputMode": "File",
        },
        RoleArn="arn:aws:iam::123456789012:role/sm",
        OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        Tags=tags,
    )["TrainingJobArn"]
    registry: JobRegistry = aws["registry"]
    registry.apply_observation(
        JobObservation(
            backend=Backend.SAGEMAKER,
            native_id=name,
            name=name,
            arn=arn,
            block=BLOCK,
            status=JobStatus.RUNNING,
            event_time=NOW - timedelta(minutes=5),
            nodes=(NodeRef(node_id=f"{name}/algo-1", kind=NodeKind.HOST, gpus=8),),
        )
    )
    aws["cloudwatch"].put_metric_data(
        Namespace="/aws/sagemaker/TrainingJobs",
        MetricData=[
            {
                "MetricName": metric,
                "Dimensions": [{"Name": "Host", "Value": f"{name}/algo-1"}],
                "Value": value,
                "Timestamp": NOW - timedelta(minutes=1),
            }
            for metric, value in (("GPUUtilization", 776.0), ("GPUMemoryUtilization", 400.0))
        ],
    )
    return arn


def test_changed_sagemaker_job_is_tagged_with_its_new_priority(aws: dict[str, Any]) -> None:
    import boto3  # noqa: PLC0415

    arn = sagemaker_job(aws, "llama-train")
    report = derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    ).report
    assert [(c["native_id"], c["previous"], c["priority"]) for c in report.changes] == [
        ("llama-train", None, 60)
    ]

    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    applied = apply_cycle([report.to_dict()], aws["registry"], [TrainingJobTagApplier(sagemaker)], now=NOW)

    assert [(r.job.native_id, r.outcome) for r in applied.results] == [("llama-train", Outcome.APPLIED)]
    tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]}
    assert tags[DERIVED_PRIORITY_TAG] == "60"
    assert applied.writes == 1
    # ... and the registry now says the backend holds it, so the next cycle has nothing left to apply
    stored = aws["registry"].get(JobKey(Backend.SAGEMAKER, "llama-train"))
    assert (stored.derived_priority, stored.applied_priority, stored.applied_at) == (60, 60, NOW)
    assert stored.apply_failure is None


def test_job_without_the_osprey_tag_is_never_written(aws: dict[str, Any]) -> None:
    import boto3  # noqa: PLC0415

    arn = sagemaker_job(aws, "someone-elses", enabled=False)
    report = derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    ).report
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    applied = apply_cycle([report.to_dict()], aws["registry"], [TrainingJobTagApplier(sagemaker)])
    assert [r.outcome for r in applied.results] == [Outcome.SKIPPED]
    assert DERIVED_PRIORITY_TAG not in {t["Key"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]}
    # ... the registry records why, as permanent, so that priority is not tried again (not even a ListTags)
    stored = aws["registry"].get(JobKey(Backend.SAGEMAKER, "someone-elses"))
    assert stored.applied_priority is None
    assert stored.apply_failure is not None
    assert (stored.apply_failure.permanent, stored.apply_failure.priority) == (True, 60)
    assert "osprey:enabled" in stored.apply_failure.reason
    calls: list[str] = []
    sagemaker.meta.events.register("before-call.sagemaker", lambda model, **_: calls.append(model.name))
    again = apply_cycle([report.to_dict()], aws["registry"], [TrainingJobTagApplier(sagemaker)])
    assert (again.results, calls) == ([], [])


def test_unreachable_eks_cluster_fails_only_its_jobs(aws: dict[str, Any]) -> None:
    import boto3  # noqa: PLC0415

    sagemaker_job(aws, "llama-train")
    registry: JobRegistry = aws["registry"]
    registry.apply_observation(
        JobObservation(
            backend=Backend.EKS,
            native_id="ml/bert",
            name="bert",
            block=BLOCK,
            status=JobStatus.RUNNING,
            event_time=NOW,
            cluster="gpu-cluster",
        )
    )

    def unreachable(cluster: str) -> Any:
        raise ConnectionError(f"{cluster}: no route to the API server")

    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    shard = derive_within(
        registry, PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    ).report
    applied = apply_cycle(
        [shard.to_dict()], registry, [TrainingJobTagApplier(sagemaker), EksApplier(unreachable)]
    )
    outcomes = {r.job: (r.outcome, r.reason) for r in applied.results}
    assert outcomes[JobKey(Backend.SAGEMAKER, "llama-train")][0] is Outcome.APPLIED
    eks_outcome, eks_reason = outcomes[JobKey(Backend.EKS, "ml/bert")]
    assert eks_outcome is Outcome.FAILED
    assert "no route to the API server" in eks_reason
    # ... recorded as a transient failure (a network error), so the next cycle tries the cluster again
    bert = registry.get(JobKey(Backend.EKS, "ml/bert"))
    assert bert is not None
    assert bert.apply_failure is not None
    assert (bert.apply_failure.permanent, bert.apply_failure.attempts) == (False, 1)
    assert bert.apply_pending()
    assert registry.pending_keys() == [bert.key]  # still in the apply-pending index: next cycle retries it
