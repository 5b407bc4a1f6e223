"""Lambda: the Slurm bridge, inside the cluster's VPC (Powertools Logger + one call into logic).

``{"action": "discover"}`` (the bridge's schedule) discovers the cluster's Osprey jobs into the registry (and
starts co-scheduled jobs' gang watches when ``OSPREY_GANG_STATE_MACHINE_ARN`` is set);
``{"action": "apply", "changes": [...]}`` (the cycle's apply step) applies priorities through slurmrestd;
``{"action": "gang", "op": ..., "nativeId": ...}`` (the gang watch) reads a gang's readiness or stops it.
Environment: the ``OSPREY_SLURM_*`` variables of :class:`osprey_control.backends.slurm.bridge.BridgeSettings`, and
``OSPREY_TABLE_NAME`` / ``OSPREY_REGISTRY_SHARDS`` for discovery. See docs/slurm.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from osprey_control.backends.slurm import BridgeSettings, run_apply, run_discovery, run_gang
from osprey_control.wiring import GANG_STATE_MACHINE_VARIABLE
from osprey_handlers._settings import PolicyReaderSettings

if TYPE_CHECKING:
    from osprey_control.registry import JobRegistry

__all__ = ["handler"]

logger = Logger(service="osprey-slurm-bridge")


@cache
def _settings() -> tuple[BridgeSettings, PolicyReaderSettings]:
    return BridgeSettings.model_validate(dict(os.environ)), PolicyReaderSettings.model_validate(
        dict(os.environ)
    )


@cache
def _gangs(state_machine_arn: str, policy_prefix: str) -> Callable[[Any], object]:
    # Only when gangs are deployed: the policy lookup (PolicySource: SSM, cached) and its imports.
    from osprey_control.policy_store import PolicySource  # noqa: PLC0415
    from osprey_control.steps.gang_start import GangRegistrar  # noqa: PLC0415

    return GangRegistrar(state_machine_arn, PolicySource(policy_prefix))


@cache
def _registry(table_name: str, shards: int) -> JobRegistry:
    from osprey_control.registry import JobRegistry  # noqa: PLC0415 - boto3 only when recording

    return JobRegistry(table_name, shards=shards)


@logger.inject_lambda_context
def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    bridge, common = _settings()
    action = event.get("action", "discover")
    if action == "apply":
        answer = run_apply(bridge, event)
        failed = [result for result in answer["results"] if result["outcome"] == "failed"]
        for result in failed:
            logger.warning("slurm priority not applied", extra=result)
        return answer
    if action == "gang":
        return run_gang(bridge, event)
    if action == "discover":
        arn = os.environ.get(GANG_STATE_MACHINE_VARIABLE, "")
        # Co-scheduled jobs get their gang watch as they are recorded, as in EKS discovery (docs/gangs.md).
        on_change = _gangs(arn, common.policy_prefix) if arn else None
        summary = run_discovery(bridge, _registry(common.table_name, common.shards), on_change=on_change)
        logger.info("slurm cluster discovered", extra=summary)
        return summary
    raise ValueError(f"unknown action {action!r}; allowed: discover, apply, gang")
