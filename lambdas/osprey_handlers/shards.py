"""Shards Lambda: which registry shards the cycle's Map runs over.
Input ignored; output ``{"shards": [..], "jobs": N, "jobsPerShard": {..}}``."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from osprey_control.registry import plan_shards
from osprey_handlers._settings import HandlerSettings

__all__ = ["ShardsSettings", "handler"]

logger = Logger(service="osprey-shards")


class ShardsSettings(HandlerSettings):
    """The function's environment (set by the CDK construct): the registry table and its shards."""


@cache
def _settings() -> ShardsSettings:
    return ShardsSettings.model_validate(dict(os.environ))


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = _settings()
    plan = plan_shards(settings.table_name, settings.shards)
    logger.info(
        "cycle planned",
        extra={"jobs": plan.jobs, "shards": len(plan.shards)},
    )
    return plan.to_dict()
