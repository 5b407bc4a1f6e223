"""Lambda: discover Osprey jobs on the configured EKS clusters (Powertools Logger + one call into logic).

Environment: :class:`~osprey_control.backends.eks.settings.EksDiscoveryEnvironment` (``OSPREY_EKS_CLUSTERS``,
``OSPREY_EKS_INCLUDE_PODS``, the registry's table and shards, the gang state machine). The pass itself is
:func:`osprey_control.backends.eks.discovery_run.run_discovery`; the answer holds counts only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.typing import LambdaContext

from osprey_control.backends.eks import (
    EksDiscoveryEnvironment,
    cached_connect,
    run_discovery,
)

if TYPE_CHECKING:
    from osprey_control.registry import JobRegistry

__all__ = ["handler"]

logger = Logger()
copy_config_to_registered_loggers(source_logger=logger, include={"osprey_control"})


@cache
def _registry(table_name: str, shards: int) -> JobRegistry:
    from osprey_control.registry import JobRegistry  # noqa: PLC0415 - boto3 only when recording

    return JobRegistry(table_name, shards=shards)


@logger.inject_lambda_context
def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    environment = EksDiscoveryEnvironment.from_environ()
    registry = _registry(environment.table_name, environment.shards) if environment.table_name else None
    if registry is None:
        logger.warning("OSPREY_TABLE_NAME is not set: discovered jobs are reported, not recorded")
    # Looked up at call time so tests can substitute the connector.
    return run_discovery(
        environment, connector=_cached_connect, registry=registry, on_change=_gangs(environment)
    )


# The connector the handler uses: one client per cluster per warm container.
_cached_connect = cached_connect


def _gangs(environment: EksDiscoveryEnvironment) -> Callable[[Any], object] | None:
    if not environment.gang_state_machine_arn or not environment.table_name:
        return None
    # Only when gangs are deployed: the policy lookup (PolicySource: SSM, cached) and its imports.
    from osprey_control.policy_store import PolicySource  # noqa: PLC0415
    from osprey_control.steps.gang_start import GangRegistrar  # noqa: PLC0415

    return GangRegistrar(environment.gang_state_machine_arn, PolicySource(environment.policy_prefix))
