"""Lease Lambda: the cycle state machine's first step (:mod:`osprey_control.steps.lease`). Input
``{"owner": <execution name>}``; output ``{"acquired", "owner", "heldBy", "expiresAt", "token"}``."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field

from osprey_control.registry import CycleLease
from osprey_control.steps.lease import take_lease
from osprey_control.wiring import LEASE_SECONDS_VARIABLE
from osprey_handlers._settings import HandlerSettings

__all__ = ["LeaseSettings", "handler"]

logger = Logger(service="osprey-lease")
copy_config_to_registered_loggers(source_logger=logger, include={"osprey_control"})


class LeaseSettings(HandlerSettings):
    ttl_seconds: int = Field(default=900, alias=LEASE_SECONDS_VARIABLE, ge=60, le=86_400)


@cache
def _lease() -> tuple[LeaseSettings, CycleLease]:
    settings = LeaseSettings.model_validate(dict(os.environ))
    return settings, CycleLease(settings.table_name)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings, lease = _lease()
    return take_lease(lease, str(event.get("owner", "")), settings.ttl_seconds)
