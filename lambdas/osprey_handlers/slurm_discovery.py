"""Lambda: the Slurm bridge, inside the cluster's VPC (Powertools Logger + one call into logic).

``{"action": "discover"}`` (the bridge's schedule) discovers the cluster's Osprey jobs into the registry;
``{"action": "apply", "changes": [...]}`` (the cycle's apply step) applies priorities through slurmrestd.
Environment: the ``OSPREY_SLURM_*`` variables of :class:`osprey_control.slurm.bridge.BridgeSettings`, and
``OSPREY_TABLE_NAME`` / ``OSPREY_REGISTRY_SHARDS`` for discovery. See docs/slurm.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from osprey_control.slurm.bridge import BridgeSettings, ObservationStore, run_apply, run_discovery
from osprey_handlers._settings import HandlerSettings

__all__ = ["handler"]

logger = Logger(service="osprey-slurm-bridge")


@cache
def _settings() -> tuple[BridgeSettings, HandlerSettings]:
    return BridgeSettings.model_validate(dict(os.environ)), HandlerSettings.model_validate(dict(os.environ))


@cache
def _registry(table_name: str, shards: int) -> ObservationStore:
    from osprey_control.registry.dynamodb import JobRegistry  # noqa: PLC0415 - boto3 only when recording

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
    if action == "discover":
        summary = run_discovery(bridge, _registry(common.table_name, common.shards))
        logger.info("slurm cluster discovered", extra=summary)
        return summary
    raise ValueError(f"unknown action {action!r}; allowed: discover, apply")
