"""The lease step, the cycle's first: take the cycle lease for this execution, or skip the cycle.

The lease keeps two executions from overlapping; its token fences every later write of this execution
(docs/control-plane.md, Fencing). Output ``{"acquired", "owner", "heldBy", "expiresAt", "token"}``: the state
machine skips the cycle when not acquired and passes ``token`` to the collect, derive and apply steps.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from osprey_control.registry import LeaseState

__all__ = ["Lease", "take_lease"]

logger = logging.getLogger(__name__)


class Lease(Protocol):
    """The cycle lease as this step uses it (:class:`osprey_control.registry.lease.CycleLease`)."""

    def acquire(self, owner: str, ttl_seconds: int) -> LeaseState: ...


def take_lease(lease: Lease, owner: str, ttl_seconds: int) -> dict[str, Any]:
    """Acquire the lease for ``owner`` (the execution's name) for ``ttl_seconds``; the state machine's view."""
    state = lease.acquire(owner, ttl_seconds)
    if not state.acquired:
        logger.info(
            "cycle skipped: lease held", extra={"held_by": state.held_by, "expires_at": state.expires_at}
        )
    return state.to_dict()
