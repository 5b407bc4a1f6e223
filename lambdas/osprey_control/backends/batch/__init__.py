"""AWS Batch container jobs on fair-share queues (backend ``batch``).

Recognised from EventBridge's Batch Job State Change events (ingest); the applier turns priorities into
fair-share ``weightFactor``s, one UpdateSchedulingPolicy per policy per cycle (:mod:`.applier`); its gang is
the node jobs of a multi-node parallel job (:mod:`.gang`).
"""

from __future__ import annotations

from osprey_control.backends.batch.applier import BatchShareApplier
from osprey_control.backends.batch.cycle import ActiveJobs, ShareLedgerPort
from osprey_control.backends.batch.events import EVENTS
from osprey_control.backends.batch.gang import BatchGang, batch_readiness
from osprey_control.backends.batch.naming import BATCH_RUNTIME
from osprey_control.backends.batch.ownership import is_osprey_identifier, own_share_identifier
from osprey_control.backends.batch.pending import MAX_WEIGHT, MIN_WEIGHT, weight_factor
from osprey_control.backends.batch.team_shares import (
    TeamShare,
    TeamShareState,
    decayed_usage,
    fold_weights,
    parse_team_share,
    team_share_identifier,
)
from osprey_control.backends.driver import Deployment, EventBackend
from osprey_control.registry import Backend

__all__ = [
    "DRIVER",
    "MAX_WEIGHT",
    "MIN_WEIGHT",
    "ActiveJobs",
    "BatchGang",
    "BatchShareApplier",
    "ShareLedgerPort",
    "TeamShare",
    "TeamShareState",
    "batch_readiness",
    "decayed_usage",
    "fold_weights",
    "is_osprey_identifier",
    "own_share_identifier",
    "parse_team_share",
    "team_share_identifier",
    "weight_factor",
]


def _applier(deployment: Deployment) -> BatchShareApplier:
    # The share ledger lets the applier prune Osprey's entries without a job; the registry's active Batch jobs
    # are what the team shares' weights are computed from.
    listing = deployment.active_jobs
    active_jobs = None if listing is None else (lambda: listing(Backend.BATCH))
    return BatchShareApplier(deployment.client("batch"), deployment.share_ledger, active_jobs)


DRIVER = EventBackend(
    Backend.BATCH,
    EVENTS,
    BATCH_RUNTIME,
    build_applier=_applier,
    build_gang=lambda job, deployment: BatchGang(job.native_id, client=deployment.client("batch")),
)
