"""Backend ``sagemaker`` (``osprey_control.backends.sagemaker``): SageMaker training jobs.

It has no resources of its own; it grants what its code calls:

- reads (DescribeTrainingJob, ListTags) of training jobs, by ARN, to ingest (recognition by environment), apply
  (the tag applier reads a job's tags, and looks its ARN up when the registry has none yet) and the gang watch
  (readiness), whichever backends are on: ingest records every training job event EventBridge delivers, and the
  apply and gang steps read the jobs it recorded;
- with the backend on: AddTags of the one tag Osprey writes (``osprey:derived-priority``, ``aws:TagKeys``) to
  apply, and StopTrainingJob (the gang ``fail`` fallback) to the gang watch, both only on training jobs tagged
  ``osprey:enabled=true`` (``aws:ResourceTag``), so Osprey cannot rewrite the opt-in or cost tags.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from osprey_control.backends import DERIVED_PRIORITY_TAG
from osprey_infra.backends.grantees import BackendGrantees
from osprey_infra.nag import acknowledge_wildcard, nag_arn
from osprey_infra.permissions import TAGGED

__all__ = ["SAGEMAKER_READS", "SageMakerBackend", "training_jobs"]

# SageMaker reads (DescribeTrainingJob, ListTags) that recognition, apply and the gang watch make.
SAGEMAKER_READS = ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"]
_TRAINING_JOBS = nag_arn("sagemaker", "training-job/*")


def training_jobs(scope: cdk.Stack) -> str:
    """Every training job of this account and region (names are the user's, so ``*``)."""
    return scope.format_arn(service="sagemaker", resource="training-job", resource_name="*")


class SageMakerBackend(Construct):
    """``enabled``: the deployment's ``backends`` include ``sagemaker`` (the writes)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, grantees: BackendGrantees, enabled: bool
    ) -> None:
        super().__init__(scope, construct_id)
        jobs = training_jobs(cdk.Stack.of(self))
        ingest, apply, watch = grantees.ingest.role, grantees.apply.role, grantees.gangs.watch.role
        for reader in (ingest, apply, watch):
            reader.add_to_principal_policy(iam.PolicyStatement(actions=SAGEMAKER_READS, resources=[jobs]))
        if enabled:
            apply.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["sagemaker:AddTags"],
                    resources=[jobs],
                    # ForAllValues alone also holds for a request without tag keys; Null rules that out.
                    conditions={
                        **TAGGED,
                        "ForAllValues:StringEquals": {"aws:TagKeys": [DERIVED_PRIORITY_TAG]},
                        "Null": {"aws:TagKeys": "false"},
                    },
                )
            )
            watch.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["sagemaker:StopTrainingJob"], resources=[jobs], conditions=TAGGED
                )
            )
        acknowledge_wildcard(
            ingest,
            _TRAINING_JOBS,
            "Reads (DescribeTrainingJob, ListTags) of the training jobs whose events it records; any name.",
        )
        acknowledge_wildcard(
            apply,
            _TRAINING_JOBS,
            "Reads training jobs; AddTags only on those tagged osprey:enabled=true and only of the key "
            "osprey:derived-priority (aws:ResourceTag and aws:TagKeys conditions).",
        )
        acknowledge_wildcard(
            watch,
            _TRAINING_JOBS,
            "Reads training jobs; stops only those tagged osprey:enabled=true (aws:ResourceTag condition).",
        )
