"""What each function may do on the registry table: the DynamoDB actions its code calls, and nothing else.

CDK's ``grant_read_write_data`` would also give Scan, DeleteItem, BatchWriteItem, DescribeTable and the stream
reads on every item, which no Osprey function needs: with it, any function could delete the cycle lease or a
job (the apply function deletes only its share-ledger items, under a ``dynamodb:LeadingKeys`` condition). Each
:class:`TableAccess` below lists the calls of the modules its handler uses (the comment names them), so a new
call needs a line here; ``tests/infra/test_least_privilege.py`` runs a cycle and fails on any DynamoDB call a
role was not granted.

A transaction (TransactWriteItems) has no action of its own: IAM checks each item as its PutItem, UpdateItem,
DeleteItem or ConditionCheckItem. Query is granted on the named indexes only, plus the table when the
function queries the table itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam

from osprey_control.registry import ACTIVE_INDEX, APPLY_PENDING_INDEX, LEASE_PK, SHARES_PK, WRITES_PK

__all__ = [
    "APPLY",
    "APPLY_SHARES",
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
    "TableAccess",
    "grant_table_access",
]


@dataclass(frozen=True)
class TableAccess:
    """``actions`` on the table's items; Query on ``indexes``; ``leading_keys``: when set, the only partition
    keys the actions may touch (the ``dynamodb:LeadingKeys`` condition)."""

    actions: tuple[str, ...] = ()
    indexes: tuple[str, ...] = ()
    leading_keys: tuple[str, ...] = ()


_GET, _PUT, _UPDATE = "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"
_QUERY, _CHECK, _BATCH_GET = "dynamodb:Query", "dynamodb:ConditionCheckItem", "dynamodb:BatchGetItem"
_DELETE = "dynamodb:DeleteItem"

# JobRegistry.apply_observation (GetItem, PutItem) and mark_spot_risk (UpdateItem on the instance's RISK
# item, Query of the instance's JOB# links on the table, then the jobs' GetItem/PutItem).
INGEST = TableAccess((_GET, _PUT, _UPDATE, _QUERY))
# CycleLease.acquire / release: one conditional UpdateItem each, on the lease item only.
LEASE = TableAccess((_UPDATE,), leading_keys=(LEASE_PK,))
# CycleLease.release; the cycle metrics go out as EMF log lines, not through the table.
FINISH = TableAccess((_UPDATE,), leading_keys=(LEASE_PK,))
# plan_shards: a COUNT Query per shard on the active-jobs index.
SHARDS = TableAccess(indexes=(ACTIVE_INDEX,))
# JobRegistry.list_active (Query on active-jobs), CollectionStore.put (PutItem of the shard's collection).
COLLECT = TableAccess((_PUT,), indexes=(ACTIVE_INDEX,))
# list_active; CollectionStore.get and Fence.holds (GetItem); record_decision: GetItem, then a transaction of
# the job and history Puts with the fence's ConditionCheck on the lease item.
DERIVE = TableAccess((_GET, _PUT, _CHECK), indexes=(ACTIVE_INDEX,))
# pending_keys (Query on apply-pending), get and Fence.holds (GetItem); record_applied / record_apply_failure:
# a PutItem, or with the fence a transaction of that Put and the ConditionCheck; ShareLedger.add (PutItem) and
# ShareLedger.finished (BatchGetItem of the jobs' META items); list_active(backend=batch) (Query on active-jobs:
# the Batch applier weighs each team share over all its active jobs).
APPLY = TableAccess((_GET, _PUT, _CHECK, _BATCH_GET), indexes=(APPLY_PENDING_INDEX, ACTIVE_INDEX))
# ShareLedger.entries (Query of the ledger's partition) and remove (DeleteItem), WriteIntents.open (Query) and
# resolve (DeleteItem, in a fenced transaction): the ledger's and the write intents' items only.
APPLY_SHARES = TableAccess((_QUERY, _DELETE), leading_keys=(SHARES_PK, WRITES_PK))
# JobRegistry.apply_observation; reconciliation (backends.reconcile): list_active(backend=eks) (Query on
# active-jobs), update (GetItem, PutItem of the job) and the STATUS# history item (PutItem).
EKS_DISCOVERY = TableAccess((_GET, _PUT), indexes=(ACTIVE_INDEX,))
# The Slurm bridge: JobRegistry.apply_observation (the instance links are PutItems, their risk GetItems), and
# reconciliation as EKS discovery's (list_active(backend=slurm) on active-jobs).
SLURM_BRIDGE = TableAccess((_GET, _PUT), indexes=(ACTIVE_INDEX,))
# GangStore.load (GetItem) and save (conditional PutItem) of the job's GANG item.
GANG_WATCH = TableAccess((_GET, _PUT))
# The plan step: list_active (Query on active-jobs), BatchGetItem of the PLANREQ items, PutItem of PLAN records,
# UpdateItem of planned_at / plan_reason on PLANREQ, each in a transaction with the fence's ConditionCheck.
PLAN = TableAccess((_BATCH_GET, _PUT, _UPDATE, _CHECK), indexes=(ACTIVE_INDEX,))


def grant_table_access(table: dynamodb.ITable, role: iam.IRole, access: TableAccess) -> None:
    """Add ``access`` to ``role``'s policy: one statement for the items, one for the index Queries."""
    if access.actions:
        conditions = (
            {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": list(access.leading_keys)}}
            if access.leading_keys
            else None
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(access.actions), resources=[table.table_arn], conditions=conditions
            )
        )
    if access.indexes:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[_QUERY],
                resources=[f"{table.table_arn}/index/{index}" for index in access.indexes],
            )
        )
