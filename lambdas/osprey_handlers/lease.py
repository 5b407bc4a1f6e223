"""Lease Lambda: the cycle state machine's first step. Input ``{"owner": <execution name>}``; output
``{"acquired", "owner", "heldBy", "expiresAt", "token"}`` — the state machine skips the cycle when not acquired,
and passes ``token`` (the fencing token, docs/control-plane.md, Fencing) to the derive and apply steps."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field

from osprey_control.registry.lease import CycleLease
from osprey_control.wiring import LEASE_SECONDS_VARIABLE
from osprey_handlers._settings import HandlerSettings

__all__ = ["LeaseSettings", "handler"]

logger = Logger(service="osprey-lease")


class LeaseSettings(HandlerSettings):
    ttl_seconds: int = Field(default=900, alias=LEASE_SECONDS_VARIABLE, ge=60, le=86_400)


@cache
def _lease() -> tuple[LeaseSettings, CycleLease]:
    settings = LeaseSettings.model_validate(dict(os.environ))
    return settings, CycleLease(settings.table_name)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings, lease = _lease()
    state = lease.acquire(str(event.get("owner", "")), settings.ttl_seconds)
    if not state.acquired:
        logger.info(
            "cycle skipped: lease held", extra={"held_by": state.held_by, "expires_at": state.expires_at}
        )
    return state.to_dict()
