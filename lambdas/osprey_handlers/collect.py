"""Collect Lambda: the cycle's one metric collection, for every shard, stored for the shards' derive steps.
Input ``{"shards": [..], "token": T, "expiresAt": E}`` (the shard plan's shards, the execution's lease token and
its expiry: a step that starts with the lease (nearly) over collects nothing); output counts
only: ``jobs``, ``series``, ``getmetricdata_calls``, ``stored`` and ``tooLarge`` shards
(:mod:`osprey_control.steps.collect`), and ``invalidPolicies`` when a deployed policy's stored value is refused
(:mod:`osprey_control.steps.policy_health`; also logged, and published as ``InvalidPolicies``). The guard's
verdicts (:mod:`osprey_control.metrics.guard`) are published per backend: ``GuardStoodDown``,
``GuardEvaluations`` and ``GuardFailures``."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from osprey_control.policy_store import PolicySource
from osprey_control.registry import CollectionStore, JobRegistry
from osprey_control.steps.collect import collect_for_cycle
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.policy_health import invalid_policy_metrics
from osprey_control.telemetry import MetricPoint, guard_metrics
from osprey_control.wiring import COLLECTION_LATENCY_METRIC
from osprey_handlers._settings import PolicyReaderSettings
from osprey_handlers._telemetry import publish

__all__ = ["CollectEvent", "CollectSettings", "LeaseExpiredError", "handler"]

logger = Logger(service="osprey-collect")
# The library's own lines (the guard's verdict per pool, a failed chunk) in the same structured form.
copy_config_to_registered_loggers(source_logger=logger, include={"osprey_control"})


class CollectSettings(PolicyReaderSettings):
    """The function's environment (set by the CDK construct)."""


class CollectEvent(BaseModel):
    """What the state machine passes: the planned shards and the lease token."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    shards: list[int] = Field(max_length=1000)
    token: int
    # The lease's expiry (epoch seconds): a collection that would be stored after it is not stored.
    expires_at: int | None = Field(default=None, alias="expiresAt")


class LeaseExpiredError(Exception):
    """The execution's lease ends before this step could finish: nothing collected (the state machine's Catch
    goes on to the shards, which read their own metrics within their own deadlines)."""

    def __init__(self, token: int) -> None:
        super().__init__(f"the cycle lease of token {token} has (nearly) expired; no collection stored")


@cache
def _settings() -> CollectSettings:
    return CollectSettings.model_validate(dict(os.environ))


@cache
def _components() -> tuple[JobRegistry, PolicySource, CollectionStore]:
    """One set per container: clients and the policy cache are reused."""
    settings = _settings()
    registry = JobRegistry(settings.table_name, shards=settings.shards)
    return (
        registry,
        PolicySource(settings.policy_prefix),
        CollectionStore(settings.table_name, registry.client),
    )


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = _settings()
    request = CollectEvent.model_validate(event)
    deadline = Deadline.for_invocation(
        context.get_remaining_time_in_millis, lease_expires_at=request.expires_at
    )
    if deadline.expired:  # the lease is (nearly) over: the shards would not use this collection any more
        raise LeaseExpiredError(request.token)
    registry, policies, store = _components()
    report = collect_for_cycle(
        registry, policies, store, shards=request.shards, token=request.token, deadline=deadline
    )
    # The same series the shards' derive steps publish when they collect for themselves (no new metric cost).
    publish(
        [
            MetricPoint(COLLECTION_LATENCY_METRIC, "Milliseconds", (report.collection_ms,)),
            *invalid_policy_metrics(report.invalid_policies),
            *guard_metrics(report.guard),
        ],
        settings.metrics_namespace,
    )
    for name, invalid in report.invalid_policies.items():
        logger.warning("invalid policy", extra={"policy": name, "error": invalid.describe()})
    if report.too_large:
        logger.warning(
            "shard collections too large to store; those shards read CloudWatch themselves",
            extra={"shards": list(report.too_large)},
        )
    failed = [f"{pool.backend}:{pool.pool}" for pool in report.guard if pool.failed]
    if failed:
        logger.warning("guard failed; those pools keep the policy's order", extra={"pools": failed[:20]})
    logger.info("cycle metrics collected", extra={**report.to_dict(), "guard_ms": round(report.guard_ms, 1)})
    return report.to_dict()
