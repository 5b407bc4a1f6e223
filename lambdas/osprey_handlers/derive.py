"""Derive Lambda: one shard of a cycle (collect → derive → record). Input ``{"shard": N, "token": T, "expiresAt": E}``
(``token``: the execution's lease token, which every registry write is conditional on; absent: unfenced;
``expiresAt``: the lease's expiry, epoch seconds, which bounds the step's deadline). The metrics are
the shard's part of the cycle's collection, stored under the token by the collect step; CloudWatch is read here
only for jobs that part lacks, or for all of them when there is none. Output the shard's
counts (``evaluated``, ``pending``, ``jobs_failed``, ``series``, ``getmetricdata_calls``), the first failures and
``deferred``, the jobs left for the next cycle because the function's remaining time ran short
(docs/control-plane.md, Liveness). Its size does not depend on the number of jobs (Payload): the pending jobs
are in the registry's ``apply-pending`` index, where the apply step finds them. ``fenceLost: true`` when another
execution took the lease meanwhile and this one stopped writing (docs/control-plane.md, Fencing).
``invalidPolicyCount`` when deployed policies' stored values are refused (each logged as ``invalid policy``,
and named in the collect step's output): their jobs are derived under their last good version or, without one,
fail as ``invalid-policy`` and keep their priority (docs/operations.md)."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field

from osprey_control.custom_rules import DEFAULT_ALLOWED_PREFIX, LambdaRuleInvoker, RuleAllowList
from osprey_control.metrics import CollectionResult, SnapshotError, decode
from osprey_control.policy_store import PolicySource
from osprey_control.registry import CollectionStore, Fence, JobRegistry
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.derive import derive_within
from osprey_control.wiring import ALLOWED_RULE_PREFIX_VARIABLE, PER_JOB_METRICS_VARIABLE
from osprey_handlers._settings import PolicyReaderSettings
from osprey_handlers._telemetry import publish

__all__ = ["DeriveSettings", "handler"]

logger = Logger(service="osprey-derive")


class DeriveSettings(PolicyReaderSettings):
    """The function's environment (set by the CDK construct)."""

    allowed_rule_prefix: str = Field(default=DEFAULT_ALLOWED_PREFIX, alias=ALLOWED_RULE_PREFIX_VARIABLE)
    per_job_metrics: bool = Field(default=False, alias=PER_JOB_METRICS_VARIABLE)


@cache
def _settings() -> DeriveSettings:
    return DeriveSettings.model_validate(dict(os.environ))


@cache
def _components(account: str, region: str) -> tuple[JobRegistry, PolicySource, LambdaRuleInvoker]:
    """One set per container: clients, the policy cache and the invoker's thread pool are reused. Rules are
    checked against this function's own account and region, as ``cdk synth`` checked them."""
    settings = _settings()
    registry = JobRegistry(settings.table_name, shards=settings.shards)
    policies = PolicySource(settings.policy_prefix)
    allowed = RuleAllowList.for_deployment(settings.allowed_rule_prefix, account=account, region=region)
    invoker = LambdaRuleInvoker(allowed)
    return registry, policies, invoker


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = _settings()
    arn = context.invoked_function_arn.split(":")
    registry, policies, invoker = _components(arn[4], arn[3])
    shard = event.get("shard")
    token = event.get("token")
    fence = Fence(settings.table_name, int(token), registry.client) if token is not None else None
    prior = _stored_collection(settings.table_name, registry.client, shard, token)
    run = derive_within(
        registry,
        policies,
        invoker,
        Deadline.for_invocation(
            context.get_remaining_time_in_millis, lease_expires_at=_expiry(event.get("expiresAt"))
        ),
        shard=int(shard) if shard is not None else None,
        per_job_metrics=settings.per_job_metrics,
        fence=fence,
        prior=prior,
    )
    publish(run.report.metrics, settings.metrics_namespace)
    for name, invalid in run.invalid_policies.items():
        logger.warning("invalid policy", extra={"policy": name, "error": invalid.describe()})
    for failure in run.report.failures:
        logger.warning("job not derived", extra=failure)
    if run.fence_lost:
        logger.warning(
            "fence lost: another execution holds the lease; shard stopped writing", extra={"shard": shard}
        )
    if run.deferred:
        logger.warning(
            "deadline reached: jobs left for the next cycle",
            extra={"shard": shard, "deferred": len(run.deferred), "evaluated": run.report.evaluated},
        )
    return run.to_dict()


def _expiry(value: object) -> float | None:
    """The lease's expiry (epoch seconds) from the state machine, None when absent (a direct call)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expiresAt must be the lease's expiry in epoch seconds, got {value!r}")
    return float(value)


def _stored_collection(
    table_name: str, client: object, shard: object, token: object
) -> CollectionResult | None:
    """This execution's collection for the shard (the collect step's), or None to read CloudWatch here."""
    if shard is None or token is None:
        return None
    body = CollectionStore(table_name, client).get(int(str(shard)), int(str(token)))
    if body is None:
        logger.info("no stored collection for this shard; reading CloudWatch", extra={"shard": shard})
        return None
    try:
        return decode(body)
    except SnapshotError as error:
        logger.warning("stored collection unreadable; reading CloudWatch", extra={"error": str(error)})
        return None
