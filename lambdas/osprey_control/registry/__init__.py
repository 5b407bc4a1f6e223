"""The job registry: what Osprey knows about every job it manages (model here, DynamoDB adapter beside it)."""

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
)

__all__ = [
    "ACTIVE_STATUSES",
    "MAX_TRANSIENT_APPLY_ATTEMPTS",
    "STATUS_ORDER",
    "ApplyFailure",
    "Backend",
    "JobKey",
    "JobRecord",
    "JobStatus",
    "NodeKind",
    "NodeRef",
]
