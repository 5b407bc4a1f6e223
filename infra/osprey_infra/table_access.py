"""What each function may do on the registry table: the DynamoDB actions its code calls, each write only on the
item types it owns, and nothing else.

CDK's ``grant_read_write_data`` would also give Scan, DeleteItem, BatchWriteItem, DescribeTable and the stream
reads on every item, which no Osprey function needs. Each :class:`TableAccess` below lists the calls of the
modules its handler uses (the comment names them), so a new call needs a line here;
``tests/infra/test_least_privilege.py`` runs a cycle and fails on any DynamoDB call a role was not granted.

Every write (PutItem, UpdateItem, DeleteItem, and the fence's ConditionCheckItem) is granted under a
``dynamodb:LeadingKeys`` condition naming the partition-key prefixes of the item types the function writes
(:data:`osprey_control.registry.keys.ITEM_PREFIXES`: every item type has its own), so a function that writes
jobs cannot write the cycle lease, another step's history or the gang watch's state. The lease item is written
by the lease and finish functions only; the fenced writers may only ConditionCheck it. Reads (GetItem,
BatchGetItem) stay on the whole table: what a function reads cannot change what the others wrote.

A transaction (TransactWriteItems) has no action of its own: IAM checks each item as its PutItem, UpdateItem,
DeleteItem or ConditionCheckItem. Query is granted on the named indexes only, plus the table, under
LeadingKeys, when the function queries one partition of the table itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam

from osprey_control.registry import (
    ACTIVE_INDEX,
    APPLY_PENDING_INDEX,
    APPLY_PREFIX,
    COLLECTION_PREFIX,
    DECISION_PREFIX,
    GANG_PREFIX,
    INSTANCE_PREFIX,
    JOB_PREFIX,
    LEASE_PK,
    PLAN_PREFIX,
    PLAN_REQUEST_PREFIX,
    RISK_PREFIX,
    SHARES_PK,
    STATUS_PREFIX,
    WRITES_PK,
)

__all__ = [
    "APPLY",
    "COLLECT",
    "DERIVE",
    "EKS_DISCOVERY",
    "FINISH",
    "GANG_WATCH",
    "INGEST",
    "LEASE",
    "PLAN",
    "SHARDS",
    "SLURM_BRIDGE",
    "Scoped",
    "TableAccess",
    "grant_table_access",
]


@dataclass(frozen=True)
class Scoped:
    """``actions`` on the items whose partition key matches one of ``keys`` (the ``dynamodb:LeadingKeys``
    condition: an item type's prefix followed by ``*``, or the one key of a single-item type)."""

    actions: tuple[str, ...]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class TableAccess:
    """``reads`` on any item of the table; each of ``scoped`` on its item types only; Query on ``indexes``."""

    reads: tuple[str, ...] = ()
    scoped: tuple[Scoped, ...] = ()
    indexes: tuple[str, ...] = ()


_GET, _PUT, _UPDATE = "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"
_QUERY, _CHECK, _BATCH_GET = "dynamodb:Query", "dynamodb:ConditionCheckItem", "dynamodb:BatchGetItem"
_DELETE = "dynamodb:DeleteItem"

# The item types, as LeadingKeys patterns.
JOBS, DECISIONS, APPLY_OUTCOMES = f"{JOB_PREFIX}*", f"{DECISION_PREFIX}*", f"{APPLY_PREFIX}*"
GANGS, PLAN_REQUESTS, PLANS = f"{GANG_PREFIX}*", f"{PLAN_REQUEST_PREFIX}*", f"{PLAN_PREFIX}*"
INSTANCE_LINKS, RISKS, COLLECTIONS = f"{INSTANCE_PREFIX}*", f"{RISK_PREFIX}*", f"{COLLECTION_PREFIX}*"
STATUSES = f"{STATUS_PREFIX}*"

# Fence.check: the ConditionCheck on the lease item in a fenced writer's transaction (the fenced writers are
# the steps that run under the lease: collect, derive, apply and plan). It cannot change the lease.
_FENCE = Scoped((_CHECK,), (LEASE_PK,))

# JobRegistry.apply_observation (GetItem of the job and its instances' risk; PutItem of the job and of its
# instance links) and mark_spot_risk (UpdateItem of the instance's RISK item, Query of the instance's JOB#
# links, then the jobs' GetItem/PutItem).
INGEST = TableAccess(
    (_GET,),
    (
        Scoped((_PUT,), (JOBS, INSTANCE_LINKS)),
        Scoped((_UPDATE,), (RISKS,)),
        Scoped((_QUERY,), (INSTANCE_LINKS,)),
    ),
)
# CycleLease.acquire / release: one conditional UpdateItem each, on the lease item only.
LEASE = TableAccess(scoped=(Scoped((_UPDATE,), (LEASE_PK,)),))
# CycleLease.release; the cycle metrics go out as EMF log lines, not through the table.
FINISH = TableAccess(scoped=(Scoped((_UPDATE,), (LEASE_PK,)),))
# plan_shards: a COUNT Query per shard on the active-jobs index.
SHARDS = TableAccess(indexes=(ACTIVE_INDEX,))
# JobRegistry.list_active (Query on active-jobs), CollectionStore.put (PutItem of the shard's collection).
COLLECT = TableAccess(scoped=(Scoped((_PUT,), (COLLECTIONS,)), _FENCE), indexes=(ACTIVE_INDEX,))
# list_active; CollectionStore.get and Fence.holds (GetItem); record_decision: GetItem, then a transaction of
# the job and history Puts with the fence's ConditionCheck on the lease item.
DERIVE = TableAccess((_GET,), (Scoped((_PUT,), (JOBS, DECISIONS)), _FENCE), (ACTIVE_INDEX,))
# pending_keys (Query on apply-pending), get and Fence.holds (GetItem); record_applied / record_apply_failure:
# a PutItem of the job and of its apply outcome, or with the fence a transaction of those and the ConditionCheck;
# ShareLedger.add (PutItem), entries (Query of the ledger's partition), remove (DeleteItem) and finished
# (BatchGetItem of the jobs' META items); list_active(backend=batch) (Query on active-jobs: the Batch applier
# weighs each team share over all its active jobs); WriteIntents.record (a fenced PutItem before each applier
# call), open (Query) and resolve (DeleteItem, in a fenced transaction) of the write intents' items.
APPLY = TableAccess(
    (_GET, _BATCH_GET),
    (
        Scoped((_PUT,), (JOBS, APPLY_OUTCOMES, SHARES_PK, WRITES_PK)),
        Scoped((_QUERY, _DELETE), (SHARES_PK, WRITES_PK)),
        _FENCE,
    ),
    (APPLY_PENDING_INDEX, ACTIVE_INDEX),
)
# JobRegistry.apply_observation (the job and its instance links are PutItems, their risk GetItems); and, when
# discovery reconciles the jobs its cluster no longer lists (issue 28 item 4), list_active(backend=...) (Query on
# active-jobs) and the JobHistory.record_status PutItem of the job's STATUS# item.
EKS_DISCOVERY = TableAccess((_GET,), (Scoped((_PUT,), (JOBS, INSTANCE_LINKS, STATUSES)),), (ACTIVE_INDEX,))
# The Slurm bridge's discovery: the same calls as EKS discovery.
SLURM_BRIDGE = TableAccess((_GET,), (Scoped((_PUT,), (JOBS, INSTANCE_LINKS, STATUSES)),), (ACTIVE_INDEX,))
# GangStore.load (GetItem) and save (conditional PutItem) of the job's GANG item.
GANG_WATCH = TableAccess((_GET,), (Scoped((_PUT,), (GANGS,)),))
# The plan step: list_active (Query on active-jobs), BatchGetItem of the PLANREQ items, GetItem and PutItem of
# PLAN records, UpdateItem of planned_at / plan_reason on PLANREQ (the job writes the request itself), each
# in a transaction with the fence's ConditionCheck.
PLAN = TableAccess(
    (_GET, _BATCH_GET),
    (Scoped((_PUT,), (PLANS,)), Scoped((_UPDATE,), (PLAN_REQUESTS,)), _FENCE),
    (ACTIVE_INDEX,),
)


def grant_table_access(table: dynamodb.ITable, role: iam.IRole, access: TableAccess) -> None:
    """Add ``access`` to ``role``'s policy: one statement for the reads, one per scoped grant (with its
    ``dynamodb:LeadingKeys`` condition) and one for the index Queries."""
    if access.reads:
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(access.reads), resources=[table.table_arn])
        )
    for scoped in access.scoped:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(scoped.actions),
                resources=[table.table_arn],
                # ForAllValues: every partition key the request touches must match (a write touches one).
                conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": list(scoped.keys)}},
            )
        )
    if access.indexes:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[_QUERY],
                resources=[f"{table.table_arn}/index/{index}" for index in access.indexes],
            )
        )
