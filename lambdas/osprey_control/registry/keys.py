"""The registry table's key layout, in one place: every item type's partition and sort keys and the index
names. Pure Python (no boto3).

============================  =============================  ===================================added to a Batch policy
a backend write in flight     ``WRITES#cycle``               ``<token>#<call>``
(the apply step's intent)
=======
============================  =============================  ==========================================

Each item type has a partition-key prefix of its own (:data:`ITEM_PREFIXES`; none is a prefix of another),
because IAM can bound a role's writes only by partition key (``dynamodb:LeadingKeys``): a role granted
``DECISION#*`` can write decision history and nothing else, and no prefix pattern matches ``LEASE#cycle``
(``osprey_infra.table_access`` grants each role its prefixes; docs/decisions.md "Least privilege per item
type"). A job's items of other types name the job the same way as its own item (``<backend>#<id>``).

Sparse indexes: ``active-jobs`` (``active_shard``) and ``apply-pending`` (``apply_pending_shard``).
docs/registry.md describes each item's attributes.
"""

from __future__ import annotations

from osprey_control.registry.model import JobKey

__all__ = [
    "APPLY_PREFIX",
    "COLLECTION_PREFIX",
    "DECISION_PREFIX",
    "GANG_PREFIX",
    "INSTANCE_PREFIX",
    "ITEM_PREFIXES",
    "JOB_PREFIX",
    "LEASE_PK",
    "PLAN_PREFIX",
    "PLAN_REQUEST_PREFIX",
    "PLAN_REQUEST_SK",
    "PLAN_SK",
    "RISK_PREFIX",
    "SHARES_PK",
    "STATUS_PREFIX",
    "WRITES_PK",
    "is_job_pk",
    "item_pk",
    "job_pk",
    "job_pk_of",
    "key_from_pk",
]

# Partition-key prefixes, one per item type. DECISION# and APPLY# also start their items' sort keys (as they did
# when history shared the job's partition), so a history Query's sort-key range reads the same either way.
JOB_PREFIX = "JOB#"
DECISION_PREFIX = "DECISION#"
APPLY_PREFIX = "APPLY#"
# A status Osprey set itself (a job its discovery no longer lists, closed by reconciliation: issue 28 item 4).
STATUS_PREFIX = "STATUS#"
GANG_PREFIX = "GANG#"
PLAN_REQUEST_PREFIX = "PLANREQ#"
PLAN_PREFIX = "PLAN#"
INSTANCE_PREFIX = "INSTANCE#"
RISK_PREFIX = "RISK#"
COLLECTION_PREFIX = "COLLECTION#"
META = "META"
RISK = "RISK"
GANG_SK = "GANG"
PLAN_SK = "PLAN"
PLAN_REQUEST_SK = "PLANREQ"
LEASE_PK = "LEASE#cycle"
SHARES_PK = "SHARES#batch"
WRITES_PK = "WRITES#cycle"
# The prefixes of a job's items keyed by ``<backend>#<native id>``.
_JOB_ITEM_PREFIXES = (
    JOB_PREFIX,
    DECISION_PREFIX,
    APPLY_PREFIX,
    STATUS_PREFIX,
    GANG_PREFIX,
    PLAN_REQUEST_PREFIX,
    PLAN_PREFIX,
)
# Every item type's partition key (a prefix, or the one key of a single-partition type): what IAM grants by.
ITEM_PREFIXES = (
    *_JOB_ITEM_PREFIXES,
    INSTANCE_PREFIX,
    RISK_PREFIX,
    COLLECTION_PREFIX,
    LEASE_PK,
    SHARES_PK,
    WRITES_PK,
)
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


def _check_job_prefix(prefix: str) -> None:
    if prefix not in _JOB_ITEM_PREFIXES:
        raise ValueError(
            f"prefix must be one of a job's item prefixes {', '.join(_JOB_ITEM_PREFIXES)}, got {prefix!r}"
        )


def item_pk(prefix: str, job: JobKey | str) -> str:
    """The partition key of the job's item of type ``prefix`` (``DECISION_PREFIX``, ``GANG_PREFIX``, ...);
    ``job`` is the job's key or its own partition key ``JOB#<backend>#<id>`` (not parsed: the plan items take
    the partition key a job names itself by, and :func:`osprey_control.planner.request.build_request` checks
    it)."""
    _check_job_prefix(prefix)
    text = job.removeprefix(JOB_PREFIX) if isinstance(job, str) else str(job)
    return f"{prefix}{text}"


def job_pk_of(pk: str, prefix: str) -> str:
    """The job's own partition key for ``pk``, the partition key of its item of type ``prefix``."""
    _check_job_prefix(prefix)
    return JOB_PREFIX + pk.removeprefix(prefix)


def is_job_pk(pk: object, prefix: str = JOB_PREFIX) -> bool:
    """Whether ``pk`` is a partition key of a job's item of type ``prefix`` that :func:`key_from_pk` can read."""
    if not isinstance(pk, str) or not pk.startswith(prefix):
        return False
    try:
        key_from_pk(pk, prefix)
    except ValueError:
        return False
    return True


def key_from_pk(pk: str, prefix: str = JOB_PREFIX) -> JobKey:
    """The job key of ``<prefix><backend>#<native id>`` (native ids may contain ``#``; backends never do)."""
    _check_job_prefix(prefix)
    if not pk.startswith(prefix):
        raise ValueError(f"not a partition key {prefix}<backend>#<native id>: {pk!r}")
    return JobKey.parse(pk.removeprefix(prefix))


def instance_pk(instance_id: str) -> str:
    return f"{INSTANCE_PREFIX}{instance_id}"


def risk_key(instance_id: str) -> dict[str, dict[str, str]]:
    """The key of the instance's spot-risk item (its own prefix: the discoveries that link instances to jobs
    may not write risk)."""
    return {"pk": {"S": f"{RISK_PREFIX}{instance_id}"}, "sk": {"S": RISK}}


def collection_key(shard: int) -> dict[str, dict[str, str]]:
    return {"pk": {"S": f"{COLLECTION_PREFIX}{shard}"}, "sk": {"S": META}}
