"""Backend ``sagemaker-queued`` (``osprey_control.backends.sagemaker_queue``): SageMaker training jobs
submitted through an AWS Batch ``SAGEMAKER_TRAINING`` job queue, i.e. Batch *service jobs*.

On with the ``sagemaker`` backend (the configuration has no key of its own). It grants what its code calls: to
apply ``UpdateServiceJob`` (the job's ``schedulingPriority``), to the gang watch ``TerminateServiceJob`` (the
``fail`` fallback), both only on service jobs tagged ``osprey:enabled=true``. Its reads are granted with
others: DescribeServiceJob among Batch's describes (:mod:`.batch`: none has resource-level permissions), the
training job a service job started with SageMaker's reads (:mod:`.sagemaker`).

With ``osprey:sagemakerQueue`` it also creates the queue the SDK's ``queue`` field targets
(``osprey.sagemaker._queue``: ``SubmitServiceJob`` with ``serviceJobType=SAGEMAKER_TRAINING``,
``schedulingPriority`` and an optional ``shareIdentifier``): a service environment and a job queue with a
fair-share scheduling policy, because Batch ignores ``schedulingPriority`` on a FIFO queue, and the priority is
what the apply step changes. Everything is tagged ``osprey:enabled=true``, the tag the apply role's IAM
conditions require.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_batch as batch
from aws_cdk import aws_iam as iam
from constructs import Construct

from osprey_control.contract import ENABLED_TAG, OPT_IN
from osprey_infra.backends.grantees import BackendGrantees
from osprey_infra.nag import acknowledge_wildcard, nag_arn
from osprey_infra.permissions import TAGGED

__all__ = ["SHARE_DECAY_SECONDS", "QueueSettings", "SageMakerQueueBackend"]

# How long past usage counts against a share identifier; an hour keeps one team's burst from starving others
# for the rest of the day while still letting priorities (not history) order a quiet queue.
SHARE_DECAY_SECONDS = 3600


@dataclass(frozen=True)
class QueueSettings:
    """The queue's name (its service environment and scheduling policy add suffixes); ``max_instances`` caps
    the training instances all jobs of the queue may run at once."""

    name: str
    max_instances: int


class SageMakerQueueBackend(Construct):
    """``queue``: the settings of the queue to create, or None (bring your own)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        grantees: BackendGrantees,
        queue: QueueSettings | None,
        writes: bool = True,
    ) -> None:
        """``writes``: False when the backend is pinned to shadow (no UpdateServiceJob, no TerminateServiceJob)."""
        super().__init__(scope, construct_id)
        if writes:
            self._grant(grantees)
        self.queue_name = queue.name if queue is not None else None
        self.queue = self._create_queue(queue) if queue is not None else None

    def _grant(self, grantees: BackendGrantees) -> None:
        service_jobs = cdk.Stack.of(self).format_arn(
            service="batch", resource="service-job", resource_name="*"
        )
        apply, watch = grantees.apply.role, grantees.gangs.watch.role
        apply.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["batch:UpdateServiceJob"], resources=[service_jobs], conditions=TAGGED
            )
        )
        watch.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["batch:TerminateServiceJob"], resources=[service_jobs], conditions=TAGGED
            )
        )
        found = nag_arn("batch", "service-job/*")
        acknowledge_wildcard(
            apply,
            found,
            "Writes only resources tagged osprey:enabled=true (aws:ResourceTag condition on the statement).",
        )
        acknowledge_wildcard(
            watch, found, "Stops only jobs tagged osprey:enabled=true (aws:ResourceTag condition)."
        )

    def _create_queue(self, settings: QueueSettings) -> batch.CfnJobQueue:
        # The resources are this construct's children under the ids they always had (stable logical IDs).
        tags = {ENABLED_TAG: OPT_IN}
        service_environment = batch.CfnServiceEnvironment(
            self,
            "ServiceEnvironment",
            service_environment_name=f"{settings.name}-env",
            service_environment_type="SAGEMAKER_TRAINING",
            capacity_limits=[
                batch.CfnServiceEnvironment.CapacityLimitProperty(
                    capacity_unit="NUM_INSTANCES", max_capacity=settings.max_instances
                )
            ],
            state="ENABLED",
            tags=tags,
        )
        scheduling_policy = batch.CfnSchedulingPolicy(
            self,
            "SchedulingPolicy",
            name=f"{settings.name}-fair-share",
            fairshare_policy=batch.CfnSchedulingPolicy.FairsharePolicyProperty(
                share_decay_seconds=SHARE_DECAY_SECONDS, compute_reservation=0
            ),
            tags=tags,
        )
        return batch.CfnJobQueue(
            self,
            "Queue",
            job_queue_name=settings.name,
            job_queue_type="SAGEMAKER_TRAINING",
            priority=1,
            state="ENABLED",
            scheduling_policy_arn=scheduling_policy.attr_arn,
            service_environment_order=[
                batch.CfnJobQueue.ServiceEnvironmentOrderProperty(
                    order=1, service_environment=service_environment.attr_service_environment_arn
                )
            ],
            tags=tags,
        )
