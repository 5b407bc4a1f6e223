"""The EC2 instance of a Batch job on EC2, from its ECS container instance, so spot warnings find the job.

A Batch Job State Change event names the job's ECS container instance (``container.containerInstanceArn``),
not its EC2 instance; one DescribeContainerInstances per container instance gives both the instance id and its
type. Answers are cached per process, unknown ones too (a container instance serves many jobs in turn).
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from osprey_control.backends.events import AwsClients, JobDescription, JobEvent
from osprey_control.errors import PermanentError, classified
from osprey_control.registry import NodeKind, NodeRef

__all__: list[str] = []

logger = logging.getLogger(__name__)

_CACHE_SIZE = 4096


class ContainerInstances:
    """A :data:`~osprey_control.backends.events.NodeFinder`: the job's EC2 instance, if its event names a
    container instance (the ``ecs`` client is created on first use when ``clients`` has none)."""

    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients
        # container instance ARN -> (EC2 instance id, instance type), negative answers too
        self._instances: OrderedDict[str, tuple[str, str | None] | None] = OrderedDict()

    def __call__(self, event: JobEvent, description: JobDescription) -> tuple[NodeRef, ...]:
        arn = event.container_instance_arn
        if arn is None:
            return ()
        if arn not in self._instances:
            self._instances[arn] = self._describe(arn)
            if len(self._instances) > _CACHE_SIZE:
                self._instances.popitem(last=False)
        instance = self._instances[arn]
        if instance is None:
            return ()
        instance_id, instance_type = instance
        node = NodeRef(
            node_id=instance_id,
            kind=NodeKind.INSTANCE,
            instance_id=instance_id,
            instance_type=instance_type,
            node_index=event.node_index,
        )
        return (node,)

    def _describe(self, arn: str) -> tuple[str, str | None] | None:
        # arn:aws:ecs:<region>:<account>:container-instance/<cluster>/<id>; the cluster is needed to describe.
        parts = arn.split(":", 5)[-1].split("/")
        if len(parts) != 3:
            return None
        ecs = self._clients.client("ecs")
        try:
            with classified():
                found = ecs.describe_container_instances(cluster=parts[1], containerInstances=[arn])
        except PermanentError as error:
            # The instance only helps spot warnings find the job: without it the job event is still recorded.
            logger.warning("container instance not described", extra={"arn": arn, "error": str(error)[:300]})
            return None
        instances = found.get("containerInstances") or []
        instance_id = instances[0].get("ec2InstanceId") if instances else None
        if not isinstance(instance_id, str):
            return None
        # ECS reports the instance type as the attribute ecs.instance-type.
        attributes = instances[0].get("attributes") or []
        instance_type = next(
            (
                a.get("value")
                for a in attributes
                if isinstance(a, dict) and a.get("name") == "ecs.instance-type"
            ),
            None,
        )
        return instance_id, instance_type if isinstance(instance_type, str) else None
