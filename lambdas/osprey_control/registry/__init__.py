"""The job registry: what Osprey knows about every job it manages, and the only owner of its DynamoDB table.

The model (jobs, keys, observations) is loaded with this front; the item codec and the adapters that reach
DynamoDB (``JobRegistry``, the lease and its fence, shards, plans, shares, gang items, collections) are loaded on
first use, so a pure caller (the planner, the gang decision, the simulator) never loads AWS code for a
``JobKey``. Both are imported from here: ``from osprey_control.registry import JobKey, JobRegistry``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from osprey_control.registry.identity import EksJobId, SlurmJobId, aliases, eks_job_id, slurm_job_id
from osprey_control.registry.keys import (
    ACTIVE_INDEX,
    APPLY_PENDING_ATTRIBUTE,
    APPLY_PENDING_INDEX,
    APPLY_PREFIX,
    COLLECTION_PREFIX,
    DECISION_PREFIX,
    GANG_PREFIX,
    INSTANCE_PREFIX,
    ITEM_PREFIXES,
    JOB_PREFIX,
    PLAN_PREFIX,
    PLAN_REQUEST_PREFIX,
    PLAN_REQUEST_SK,
    PLAN_SK,
    RISK_PREFIX,
    SHARES_PK,
    STATUS_PREFIX,
    WRITES_PK,
    is_job_pk,
    item_pk,
    job_pk,
    key_from_pk,
)
from osprey_control.registry.model import (
    ACTIVE_STATUSES,
    MAX_TRANSIENT_APPLY_ATTEMPTS,
    STATUS_ORDER,
    ApplyFailure,
    Backend,
    JobKey,
    JobRecord,
    JobStatus,
    NodeKind,
    NodeRef,
    decision_changes,
)
from osprey_control.registry.observation import JobObservation, ObservationStore, merge_observation

if TYPE_CHECKING:
    from osprey_control.registry.batch import MAX_KEYS_PER_BATCH_GET
    from osprey_control.registry.collections import CollectionStore
    from osprey_control.registry.dynamodb import DEFAULT_SHARDS, JobRegistry, VersionConflictError
    from osprey_control.registry.fence import Fence, FenceLostError
    from osprey_control.registry.gangs import GangItems, StaleGangStateError
    from osprey_control.registry.items import (
        format_time,
        from_attribute,
        item_to_record,
        parse_time,
        record_to_item,
        shard_of,
    )
    from osprey_control.registry.lease import LEASE_PK, CycleLease, LeaseState
    from osprey_control.registry.plans import PlanItems, ProgressUpdate
    from osprey_control.registry.shards import plan_shards
    from osprey_control.registry.shares import ShareEntry, ShareLedger
    from osprey_control.registry.table import TTL_ATTRIBUTE
    from osprey_control.registry.writes import MAX_INTENT_KEYS, WriteIntent, WriteIntents

__all__ = [
    "ACTIVE_INDEX",
    "ACTIVE_STATUSES",
    "APPLY_PENDING_ATTRIBUTE",
    "APPLY_PENDING_INDEX",
    "APPLY_PREFIX",
    "COLLECTION_PREFIX",
    "DECISION_PREFIX",
    "DEFAULT_SHARDS",
    "GANG_PREFIX",
    "INSTANCE_PREFIX",
    "ITEM_PREFIXES",
    "JOB_PREFIX",
    "LEASE_PK",
    "MAX_INTENT_KEYS",
    "MAX_KEYS_PER_BATCH_GET",
    "MAX_TRANSIENT_APPLY_ATTEMPTS",
    "PLAN_PREFIX",
    "PLAN_REQUEST_PREFIX",
    "PLAN_REQUEST_SK",
    "PLAN_SK",
    "RISK_PREFIX",
    "SHARES_PK",
    "STATUS_ORDER",
    "STATUS_PREFIX",
    "TTL_ATTRIBUTE",
    "WRITES_PK",
    "ApplyFailure",
    "Backend",
    "CollectionStore",
    "CycleLease",
    "EksJobId",
    "Fence",
    "FenceLostError",
    "GangItems",
    "JobKey",
    "JobObservation",
    "JobRecord",
    "JobRegistry",
    "JobStatus",
    "LeaseState",
    "NodeKind",
    "NodeRef",
    "ObservationStore",
    "PlanItems",
    "ProgressUpdate",
    "ShareEntry",
    "ShareLedger",
    "SlurmJobId",
    "StaleGangStateError",
    "VersionConflictError",
    "WriteIntent",
    "WriteIntents",
    "aliases",
    "decision_changes",
    "eks_job_id",
    "format_time",
    "from_attribute",
    "is_job_pk",
    "item_pk",
    "item_to_record",
    "job_pk",
    "key_from_pk",
    "merge_observation",
    "parse_time",
    "plan_shards",
    "record_to_item",
    "shard_of",
    "slurm_job_id",
]

# Name -> the module that defines it, for the adapters loaded on first use (PEP 562).
_ADAPTERS: dict[str, str] = {
    "format_time": "osprey_control.registry.items",
    "from_attribute": "osprey_control.registry.items",
    "item_to_record": "osprey_control.registry.items",
    "parse_time": "osprey_control.registry.items",
    "record_to_item": "osprey_control.registry.items",
    "shard_of": "osprey_control.registry.items",
    "MAX_KEYS_PER_BATCH_GET": "osprey_control.registry.batch",
    "CollectionStore": "osprey_control.registry.collections",
    "CycleLease": "osprey_control.registry.lease",
    "DEFAULT_SHARDS": "osprey_control.registry.dynamodb",
    "Fence": "osprey_control.registry.fence",
    "FenceLostError": "osprey_control.registry.fence",
    "GangItems": "osprey_control.registry.gangs",
    "JobRegistry": "osprey_control.registry.dynamodb",
    "LEASE_PK": "osprey_control.registry.lease",
    "LeaseState": "osprey_control.registry.lease",
    "PlanItems": "osprey_control.registry.plans",
    "ProgressUpdate": "osprey_control.registry.plans",
    "ShareEntry": "osprey_control.registry.shares",
    "ShareLedger": "osprey_control.registry.shares",
    "StaleGangStateError": "osprey_control.registry.gangs",
    "TTL_ATTRIBUTE": "osprey_control.registry.table",
    "VersionConflictError": "osprey_control.registry.dynamodb",
    "plan_shards": "osprey_control.registry.shards",
    "MAX_INTENT_KEYS": "osprey_control.registry.writes",
    "WriteIntent": "osprey_control.registry.writes",
    "WriteIntents": "osprey_control.registry.writes",
}


def __getattr__(name: str) -> object:
    module = _ADAPTERS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value
