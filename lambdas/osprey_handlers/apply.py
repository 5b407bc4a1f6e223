"""Apply Lambda: after the shards' Map state, write every pending derived priority to its backend and record
the outcome in the registry. Input: ``{"shards": [<derive outputs>], "token": T, "expiresAt": E}`` (the Map state's result:
which shards reported; the pending jobs themselves are read from the registry's ``apply-pending`` index;
``token``: the execution's lease token, which every write is fenced by; absent: unfenced; ``expiresAt``: the
lease's expiry, before which every backend write, retries included, must end). Output: counts,
the first :data:`FAILURE_SAMPLE` failures (each one is logged) and, when there are any, ``deferred``: the jobs
left pending for the next cycle because the function's remaining time ran short (docs/control-plane.md,
Liveness), ``fenceLost: true`` when another execution took the lease meanwhile (Fencing), and ``shadow``: the
pending jobs in shadow mode, recorded and not written (the mode is read from ``/osprey/config`` on every
invocation, docs/deploy.md, Shadow mode). The output's
size does not depend on the number of jobs (docs/control-plane.md, Payload).
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from osprey_control.backends import Applier, Deployment, appliers
from osprey_control.registry import Fence, JobRegistry, ShareLedger
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.payload import ERROR_CHARS, FAILURE_SAMPLE, ApplyRequest
from osprey_control.telemetry import MetricPoint
from osprey_control.wiring import APPLY_FAILURES_METRIC, PRIORITIES_APPLIED_METRIC
from osprey_handlers._settings import ModeReaderSettings
from osprey_handlers._telemetry import publish

__all__ = ["ApplySettings", "handler"]

logger = Logger(service="osprey-apply")


class ApplySettings(ModeReaderSettings):
    """The function's environment (set by the CDK construct): the shared settings and the config parameter."""


@cache
def _components() -> tuple[ApplySettings, JobRegistry, ShareLedger, list[Applier]]:
    settings = ApplySettings.model_validate(dict(os.environ))
    registry = JobRegistry(settings.table_name, shards=settings.shards)
    ledger = ShareLedger(settings.table_name, registry.client)
    # Every backend the deployment reaches (Slurm only with a bridge function in the cluster's VPC); Batch's
    # team shares are weighted over all their active jobs, not only the cycle's changed ones.
    deployment = Deployment(
        environment=dict(os.environ),
        share_ledger=ledger,
        active_jobs=lambda backend: registry.list_active(backend=backend),
    )
    return settings, registry, ledger, appliers(deployment)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings, registry, ledger, appliers = _components()
    request = ApplyRequest.model_validate(event)
    deadline = Deadline.for_invocation(
        context.get_remaining_time_in_millis, lease_expires_at=request.expires_at
    )
    token = request.token
    fence = Fence(settings.table_name, token, registry.client) if token is not None else None
    ledger.fence = fence  # the share ledger's writes are this execution's too
    modes = settings.modes()  # read every cycle: a changed mode counts from the next one (docs/deploy.md)
    report = apply_cycle(request.reports(), registry, appliers, deadline=deadline, fence=fence, modes=modes)
    if report.fence_lost:
        logger.warning("fence lost: another execution holds the lease; apply stopped writing")
    for result in report.failed:
        logger.warning(
            "priority not applied",
            extra={"job": str(result.job), "reason": result.reason, "transient": result.transient},
        )
    for job, error in report.unrecorded:
        logger.warning(
            "apply outcome not recorded; the job stays pending", extra={"job": str(job), "error": error}
        )
    if report.deferred:
        logger.warning(
            "deadline reached: jobs left pending for the next cycle", extra={"deferred": len(report.deferred)}
        )
    publish(
        [
            MetricPoint(PRIORITIES_APPLIED_METRIC, "Count", (float(len(report.applied)),)),
            MetricPoint(APPLY_FAILURES_METRIC, "Count", (float(len(report.failed)),)),
            MetricPoint("JobsDeferred", "Count", (float(len(report.deferred)),), {"Step": "apply"}),
        ],
        settings.metrics_namespace,
    )
    answer: dict[str, Any] = {
        "applied": len(report.applied),
        "skipped": len(report.skipped),
        "failed": len(report.failed),
        "failures": [
            {"key": str(r.job), "reason": r.reason[:ERROR_CHARS], "transient": r.transient}
            for r in report.failed[:FAILURE_SAMPLE]
        ],
        "writes": report.writes,
    }
    if report.shadow:  # shadow mode: pending jobs not written, their would-be values recorded
        answer["shadow"] = len(report.shadow)
    if report.pruned:
        answer["sharesPruned"] = report.pruned
    if report.deferred:  # only then: the cycle's output stays as it was for a cycle that finished its work
        answer["deferred"] = len(report.deferred)
    if report.fence_lost:
        answer["fenceLost"] = True
    return answer
