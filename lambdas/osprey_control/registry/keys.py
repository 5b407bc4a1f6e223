"""The registry table's key layout, in one place: every item type's partition and sort keys and the index
names. Pure Python (no boto3).

============================  =========================  ==========================================
item                          ``pk``                     ``sk``
============================  =========================  ==========================================
job                           ``JOB#<backend>#<id>``     ``META``
decision history              ``JOB#<backend>#<id>``     ``DECISION#<time>#<version>``
apply outcomes                ``JOB#<backend>#<id>``     ``APPLY#<time>#<priority>``
status set by Osprey          ``JOB#<backend>#<id>``     ``STATUS#<time>``
gang watch state              ``JOB#<backend>#<id>``     ``GANG``
plan request / plan record    ``JOB#<backend>#<id>``     ``PLANREQ`` / ``PLAN``
instance (spot risk)          ``INSTANCE#<id>``          ``RISK``
cycle lease                   ``LEASE#cycle``            ``LEASE``
a shard's metric collection   ``COLLECTION#<shard>``     ``META``
a fair-share entry Osprey     ``SHARES#batch``           ``<scheduling policy ARN>|<share id>``
added to a Batch policy
a backend write in flight     ``WRITES#cycle``           ``<token>#<call>``
(the apply step's intent)
============================  =========================  ==========================================

Sparse indexes: ``active-jobs`` (``active_shard``) and ``apply-pending`` (``apply_pending_shard``).
docs/registry.md describes each item's attributes.
"""

from __future__ import annotations

from osprey_control.registry.model import JobKey

__all__ = [
    "JOB_PREFIX",
    "PLAN_REQUEST_SK",
    "PLAN_SK",
    "SHARES_PK",
    "WRITES_PK",
    "is_job_pk",
    "job_pk",
    "key_from_pk",
]

JOB_PREFIX = "JOB#"
INSTANCE_PREFIX = "INSTANCE#"
DECISION_PREFIX = "DECISION#"
APPLY_PREFIX = "APPLY#"
STATUS_PREFIX = "STATUS#"  # a job closed by reconciliation (backends.reconcile), with the reason
COLLECTION_PREFIX = "COLLECTION#"
META = "META"
RISK = "RISK"
GANG_SK = "GANG"
PLAN_SK = "PLAN"
PLAN_REQUEST_SK = "PLANREQ"
LEASE_PK = "LEASE#cycle"
SHARES_PK = "SHARES#batch"
WRITES_PK = "WRITES#cycle"
LEASE_KEY: dict[str, dict[str, str]] = {"pk": {"S": LEASE_PK}, "sk": {"S": "LEASE"}}
ACTIVE_INDEX = "active-jobs"
# Sparse: only job items of active jobs whose derived priority still has to reach the backend carry
# ``apply_pending_shard``, so the apply step finds its work with one Query per shard (nothing passes through the
# state machine's payload).
APPLY_PENDING_INDEX = "apply-pending"
APPLY_PENDING_ATTRIBUTE = "apply_pending_shard"


def share_sk(policy_arn: str, share: str) -> str:
    """The sort key of the entry ``share`` in ``policy_arn`` (``|`` is in neither an ARN nor a share id)."""
    return f"{policy_arn}|{share}"


def job_pk(key: JobKey) -> str:
    return f"{JOB_PREFIX}{key}"


def is_job_pk(pk: object) -> bool:
    """Whether ``pk`` is a job partition key that :func:`key_from_pk` can read."""
    if not isinstance(pk, str) or not pk.startswith(JOB_PREFIX):
        return False
    try:
        JobKey.parse(pk.removeprefix(JOB_PREFIX))
    except ValueError:
        return False
    return True


def key_from_pk(pk: str) -> JobKey:
    """The job key of ``JOB#<backend>#<native id>`` (native ids may contain ``#``; backends never do)."""
    if not pk.startswith(JOB_PREFIX):
        raise ValueError(f"not a job partition key (JOB#<backend>#<native id>): {pk!r}")
    return JobKey.parse(pk.removeprefix(JOB_PREFIX))


def instance_pk(instance_id: str) -> str:
    return f"{INSTANCE_PREFIX}{instance_id}"


def collection_key(shard: int) -> dict[str, dict[str, str]]:
    return {"pk": {"S": f"{COLLECTION_PREFIX}{shard}"}, "sk": {"S": META}}
