"""Start a co-scheduled job's gang watch: one Step Functions execution per job, named after the job.

The execution name is the idempotency key: a duplicate or replayed registration event gets
``ExecutionAlreadyExists`` and starts nothing (Standard workflows keep names unique for 90 days).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from osprey_control.aws import client_for
from osprey_control.errors import classified
from osprey_control.gang.request import watch_input
from osprey_control.gang.settings import GangSettings
from osprey_control.gang.watch import execution_name
from osprey_control.registry.model import JobKey

__all__ = ["start_watch"]

logger = logging.getLogger(__name__)


def start_watch(
    state_machine_arn: str,
    key: JobKey,
    settings: GangSettings,
    policy: str,
    *,
    client: Any = None,
    **job: str,
) -> bool:
    """Start the watch of ``key``. Starting it again is harmless: Step Functions answers a repeated name and
    input of a running execution with that execution, and a finished one with ``ExecutionAlreadyExists``
    (returned here as False); either way no second watch runs."""
    sfn = client_for("stepfunctions", client)
    # Classified (osprey_control.errors) once "already started" is answered: that one is success, not a failure.
    with classified():
        try:
            sfn.start_execution(
                stateMachineArn=state_machine_arn,
                name=execution_name(key),
                input=json.dumps(watch_input(key, settings, policy, **job)),
            )
        except sfn.exceptions.ExecutionAlreadyExists:
            logger.info("gang watch already started", extra={"job": str(key)})
            return False
    return True
