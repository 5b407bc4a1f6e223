"""Which newly registered jobs get a gang watch, and starting it: the one call the ingest and discovery
functions make with every record they change.

A watch is one Step Functions execution per job, named after the job: the name is the idempotency key, so a
duplicate or replayed registration starts nothing (Standard workflows keep names unique for 90 days).

A job gets a watch when its settings (job block over the policy's ``coScheduling``) say it is co-scheduled
and it is not over yet. Starting is idempotent (the execution is named after the job), so the ingest step
calls this for every changed record of a job that is not over, without tracking whether it already did.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from osprey_control.aws import client_for
from osprey_control.errors import classified
from osprey_control.gang import GangSettings, resolve_settings, watch_input
from osprey_control.policy import CoScheduling, PriorityDerivationPolicy
from osprey_control.registry import ACTIVE_STATUSES, JobKey, JobRecord
from osprey_control.steps.gang_watch import execution_name

__all__ = ["GangRegistrar", "PolicyModels", "register_gang", "start_watch"]

logger = logging.getLogger(__name__)


class PolicyModels(Protocol):
    """Deployed policies by name (``osprey_control.policy_store.PolicySource``); LookupError if unknown."""

    def model(self, name: str) -> PriorityDerivationPolicy: ...


# Every job not over yet: a RUNNING status does not mean the gang formed (EKS calls a Job with one Ready pod
# running, SageMaker is InProgress while its hosts start); the watch finds out, and a watch already decided
# is not started again (its execution name is taken).
_WATCHABLE = ACTIVE_STATUSES


def register_gang(
    record: JobRecord,
    policy: CoScheduling,
    *,
    state_machine_arn: str,
    client: Any = None,
    kind: str | None = None,
) -> bool:
    """Start the watch of ``record`` if it is a co-scheduled job that is not over.

    Returns True when a start request was made. ``kind`` is the Kubernetes kind of an EKS job.
    The backend's gang checks what it needs of them (an EKS job without a cluster fails its watch).
    """
    settings = resolve_settings(record.block, policy)
    if settings is None or record.status not in _WATCHABLE:
        return False
    # Where the job lives, for the backend's gang (osprey_control.backends): its cluster and kind when it has them.
    job: dict[str, str] = {}
    if record.cluster:
        job["cluster"] = record.cluster
    if kind:
        job["kind"] = kind
    start_watch(state_machine_arn, record.key, settings, record.block.policy, client=client, **job)
    return True


class GangRegistrar:
    """What the ingest step calls with every changed job record: looks the job's policy up (cached) and starts
    its watch when :func:`register_gang` says so. A job whose policy is not deployed, or is invalid with no last
    good version, gets no watch (the derive step reports the policy); AWS errors propagate so the event is
    redelivered (starting is idempotent).
    """

    def __init__(self, state_machine_arn: str, policies: PolicyModels, *, client: Any = None) -> None:
        self._arn = state_machine_arn
        self._policies = policies
        self._client = client

    def __call__(self, record: JobRecord) -> bool:
        if record.status not in _WATCHABLE:
            return False  # no policy lookup for the common case of a running or finished job
        try:
            policy = self._policies.model(record.block.policy)
        except (
            LookupError
        ) as unknown:  # not deployed, or invalid without a last good version: never fails ingest
            logger.warning(
                "no gang watch: policy unknown or invalid",
                extra={"job": str(record.key), "error": str(unknown)},
            )
            return False
        self._client = client_for("stepfunctions", self._client)
        return register_gang(
            record,
            policy.spec.co_scheduling,
            state_machine_arn=self._arn,
            client=self._client,
            kind=record.kind,
        )


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
