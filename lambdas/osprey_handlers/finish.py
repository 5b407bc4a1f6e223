"""Finish Lambda: the cycle's last step on every path (:mod:`osprey_control.steps.finish`): releases the lease,
logs what failed and publishes CycleDurationMs, the outcome, FailedShards and FailedJobs."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.typing import LambdaContext

from osprey_control.registry import CycleLease
from osprey_control.steps.finish import FinishEvent, finish_cycle
from osprey_handlers._settings import HandlerSettings
from osprey_handlers._telemetry import publish

__all__ = ["FinishSettings", "handler"]

logger = Logger(service="osprey-finish")
copy_config_to_registered_loggers(source_logger=logger, include={"osprey_control"})


class FinishSettings(HandlerSettings):
    """The function's environment (set by the CDK construct): the shared settings only."""


@cache
def _components() -> tuple[FinishSettings, CycleLease]:
    settings = FinishSettings.model_validate(dict(os.environ))
    return settings, CycleLease(settings.table_name)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings, lease = _components()
    report = finish_cycle(lease, FinishEvent.model_validate(event))
    publish(report.metrics, settings.metrics_namespace)
    return report.answer
