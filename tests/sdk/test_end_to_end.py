"""End to end under moto: a job submitted through the SDK is discovered from its event, its metrics are
collected, its priority derived and applied on its backend (issue 4's "done when")."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from osprey_control.backends import DERIVED_PRIORITY_TAG
from osprey_control.backends.sagemaker import TrainingJobTagApplier
from osprey_control.ingest import Ingestor, Recogniser
from osprey_control.policy import load_policies
from osprey_control.policy.stored import policy_parameter_value
from osprey_control.policy_store import PolicySource
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.derive import derive_within
from tests.conftest import REPO_ROOT
from tests.sdk.conftest import REGION, AwsCalls
from tests.sdk.test_sagemaker_seed import SEED_DISTRIBUTION, seed_estimator


def _state_change_event(job_name: str, arn: str, now: datetime) -> dict[str, Any]:
    # As EventBridge delivers it; without Tags, so recognition has to look them up (ListTags).
    return {
        "version": "0",
        "id": "7d2b1f57-0000-4000-8000-000000000001",
        "detail-type": "SageMaker Training Job State Change",
        "source": "aws.sagemaker",
        "account": "123456789012",
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [arn],
        "detail": {
            "TrainingJobName": job_name,
            "TrainingJobArn": arn,
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Training",
            "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 8, "VolumeSizeInGB": 30},
            "CreationTime": str(int((now - timedelta(minutes=5)).timestamp() * 1000)),
        },
    }


def test_sdk_job_is_discovered_derived_and_applied(
    sagemaker_session: Any, aws_calls: AwsCalls, training_script: Any
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    session: boto3.Session = sagemaker_session.boto_session
    sagemaker, dynamodb = session.client("sagemaker"), session.client("dynamodb")
    ssm, cloudwatch = session.client("ssm"), session.client("cloudwatch")
    for policy in load_policies([REPO_ROOT / "policies"]):
        ssm.put_parameter(
            Name=f"/osprey/policies/{policy.name}", Value=policy_parameter_value(policy), Type="String"
        )
    registry = JobRegistry("osprey-jobs", client=dynamodb, shards=1)
    registry.create_table()

    # Given the seed estimator submitted through the SDK
    seed_estimator(sagemaker_session, copy.deepcopy(SEED_DISTRIBUTION)).fit(wait=False)
    job_name = aws_calls.create_training_job[0]["TrainingJobName"]
    arn = sagemaker.describe_training_job(TrainingJobName=job_name)["TrainingJobArn"]

    # When its state-change event is ingested
    outcome = Ingestor(registry, recogniser=Recogniser(sagemaker=sagemaker)).ingest(
        _state_change_event(job_name, arn, now)
    )
    record = registry.get(JobKey(Backend.SAGEMAKER, job_name))
    assert outcome.action != "ignored"
    assert record is not None
    assert record.policy == "training-policy"
    assert len(record.nodes) == 8

    # And its hosts report busy GPUs (SageMaker sums over the 8 GPUs of a p4d host)
    for node in record.nodes:
        cloudwatch.put_metric_data(
            Namespace="/aws/sagemaker/TrainingJobs",
            MetricData=[
                {
                    "MetricName": "GPUUtilization",
                    "Dimensions": [
                        {
                            "Name": "Host",
                            "Value": node.node_id if "/" in node.node_id else f"{job_name}/{node.node_id}",
                        }
                    ],
                    "Value": 8 * 92.0,
                    "Timestamp": now - timedelta(minutes=1),
                }
            ],
        )

    # And a cycle runs
    report = derive_within(registry, PolicySource(client=ssm), None, cloudwatch=cloudwatch, now=now).report
    applied = apply_cycle([report.to_dict()], registry, [TrainingJobTagApplier(sagemaker)])

    # Then its priority was derived from its GPUs and applied as the job's tag
    decision = registry.get(JobKey(Backend.SAGEMAKER, job_name))
    assert decision is not None
    assert decision.last_decision is not None
    assert decision.last_decision["rules"][0]["value"] == 92.0
    assert decision.applied_priority == 60  # 50 damped by maxPriorityChange 10 toward ~93
    assert [r.outcome.value for r in applied.results] == ["applied"]
    tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]}
    assert tags[DERIVED_PRIORITY_TAG] == "60"
