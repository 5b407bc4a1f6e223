"""An AWS Batch service environment and a ``SAGEMAKER_TRAINING`` job queue: the queue the SDK's ``queue``
field targets (``osprey.sagemaker._queue``: ``SubmitServiceJob`` with ``serviceJobType=SAGEMAKER_TRAINING``,
``schedulingPriority`` and an optional ``shareIdentifier``).

The queue has a fair-share scheduling policy because Batch ignores ``schedulingPriority`` on a FIFO queue, and
the priority is what the apply step changes (``UpdateServiceJob``). Everything is tagged
``osprey:enabled=true``, the tag the apply role's IAM conditions require.
"""

from __future__ import annotations

from aws_cdk import aws_batch as batch
from constructs import Construct

from osprey_control.contract import ENABLED_TAG

__all__ = ["SHARE_DECAY_SECONDS", "SageMakerTrainingQueue"]

# How long past usage counts against a share identifier; an hour keeps one team's burst from starving others
# for the rest of the day while still letting priorities (not history) order a quiet queue.
SHARE_DECAY_SECONDS = 3600


class SageMakerTrainingQueue(Construct):
    """``max_instances`` caps the training instances all jobs of the queue may run at once."""

    def __init__(self, scope: Construct, construct_id: str, *, queue_name: str, max_instances: int) -> None:
        super().__init__(scope, construct_id)
        tags = {ENABLED_TAG: "true"}
        self.service_environment = batch.CfnServiceEnvironment(
            self,
            "ServiceEnvironment",
            service_environment_name=f"{queue_name}-env",
            service_environment_type="SAGEMAKER_TRAINING",
            capacity_limits=[
                batch.CfnServiceEnvironment.CapacityLimitProperty(
                    capacity_unit="NUM_INSTANCES", max_capacity=max_instances
                )
            ],
            state="ENABLED",
            tags=tags,
        )
        self.scheduling_policy = batch.CfnSchedulingPolicy(
            self,
            "SchedulingPolicy",
            name=f"{queue_name}-fair-share",
            fairshare_policy=batch.CfnSchedulingPolicy.FairsharePolicyProperty(
                share_decay_seconds=SHARE_DECAY_SECONDS, compute_reservation=0
            ),
            tags=tags,
        )
        self.queue = batch.CfnJobQueue(
            self,
            "Queue",
            job_queue_name=queue_name,
            job_queue_type="SAGEMAKER_TRAINING",
            priority=1,
            state="ENABLED",
            scheduling_policy_arn=self.scheduling_policy.attr_arn,
            service_environment_order=[
                batch.CfnJobQueue.ServiceEnvironmentOrderProperty(
                    order=1, service_environment=self.service_environment.attr_service_environment_arn
                )
            ],
            tags=tags,
        )
        self.queue_name = queue_name
