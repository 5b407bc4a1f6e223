"""Gang watch Lambda: one step of a co-scheduled job's watch (Powertools Logger + one call into logic).

Input: the execution input of the gang watch state machine (``osprey_control.gang.request``); output
``{"done", "waitSeconds", "action", "gang"}``. The state machine waits ``waitSeconds`` and calls again until
``done``. Backend faults raise, so the task's Retry backs off; an invalid input fails the execution at once.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.typing import LambdaContext

from osprey_control.backends import Deployment, driver_for
from osprey_control.gang import GangBackend, WatchJob, WatchRequest
from osprey_control.gang.store import GangStore
from osprey_control.steps.gang_watch import watch_step
from osprey_handlers._settings import ModeReaderSettings
from osprey_handlers._telemetry import publish

__all__ = ["GangWatchSettings", "handler"]

logger = Logger(service="osprey-gang-watch")
# The watch's decisions are logged by osprey_control.gang ("gang decided"): give them this handler's JSON format.
copy_config_to_registered_loggers(source_logger=logger, include={"osprey_control"})


class GangWatchSettings(ModeReaderSettings):
    """The function's environment (set by the CDK construct): the shared settings and the config parameter."""


@cache
def _settings() -> tuple[GangWatchSettings, GangStore]:
    settings = GangWatchSettings.model_validate(dict(os.environ))
    return settings, GangStore(settings.table_name)


def _gang(job: WatchJob) -> GangBackend:
    # The environment names what the deployment has (the Slurm bridge, when deployed, reads Slurm gangs).
    return driver_for(job.backend).gang(job, Deployment(environment=dict(os.environ)))


def _now() -> datetime:
    return datetime.now(UTC)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings, store = _settings()
    request = WatchRequest.model_validate(event)
    backend = _gang(request.job)
    # Read on every step: a gang in shadow is watched and decided, its fallback never sent to the backend.
    mode = settings.modes().for_job(request.job.backend, request.policy)
    result = watch_step(
        request.job.key,
        request.settings.to_settings(),
        backend,
        store,
        now=_now(),
        policy=request.policy,
        mode=mode,
    )
    publish(result.metrics, settings.metrics_namespace)
    return result.to_dict()
