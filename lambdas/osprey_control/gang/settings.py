"""A gang's settings: the job's own ``osprey`` block first, the policy's ``coScheduling`` for the rest.

Pure Python, no AWS import (docs/design.md §5, §7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from osprey_control.contract import OspreyBlock
from osprey_control.policy import CoScheduling, GangFallback

__all__ = ["GangSettings", "poll_interval_seconds", "requeue_delay_seconds", "resolve_settings"]

# Readiness is polled every min(10 s, timeout / 6): six looks inside the timeout, never slower than 10 s.
MAX_POLL_SECONDS = 10
# `requeue` backs off like Kueue's waitForPodsReady requeuing: 60 s, doubling, capped at an hour ...
REQUEUE_BASE_SECONDS = 60
REQUEUE_CAP_SECONDS = 3600
# ... and after this many requeues the gang falls back to `fail` (docs/gangs.md).
DEFAULT_MAX_REQUEUES = 5


@dataclass(frozen=True)
class GangSettings:
    """What the watch enforces for one co-scheduled job."""

    timeout_seconds: int
    required_min_workers: int  # percent of the requested workers, 1..100
    fallback: GangFallback
    max_requeues: int = DEFAULT_MAX_REQUEUES

    @property
    def poll_seconds(self) -> int:
        return poll_interval_seconds(self.timeout_seconds)

    def is_ready(self, ready_workers: int, requested_workers: int) -> bool:
        """docs/design.md §7: ready when ready / requested >= requiredMinWorkers / 100 (integer arithmetic, exact)."""
        if requested_workers <= 0:
            return False
        return ready_workers * 100 >= self.required_min_workers * requested_workers


def poll_interval_seconds(timeout_seconds: int) -> int:
    """min(10, timeout / 6), rounded up to whole seconds (a Wait state takes integers), at least 1."""
    return max(1, min(MAX_POLL_SECONDS, math.ceil(timeout_seconds / 6)))


def requeue_delay_seconds(attempt: int) -> int:
    """The back-off before the ``attempt``-th requeued try (1-based): 60, 120, 240, ... capped at 3600."""
    if attempt < 1:
        raise ValueError(f"attempt must be 1 or more, got {attempt}")
    # 2**6 * 60 already exceeds the cap; bounding the exponent keeps huge attempt counts cheap.
    exponent: int = min(attempt - 1, 16)
    return min(REQUEUE_CAP_SECONDS, REQUEUE_BASE_SECONDS * (1 << exponent))


def resolve_settings(block: OspreyBlock, policy: CoScheduling) -> GangSettings | None:
    """The gang settings of a job, or None when it is not co-scheduled.

    The job's ``co_schedule`` wins over the policy's ``enabled``; ``gang_timeout`` and
    ``required_min_workers`` likewise; the fallback is the policy's (the job contract has no fallback key).
    """
    enabled = block.co_schedule if block.co_schedule is not None else policy.enabled
    if not enabled:
        return None
    return GangSettings(
        timeout_seconds=block.gang_timeout if block.gang_timeout is not None else policy.gang_timeout_seconds,
        required_min_workers=(
            block.required_min_workers
            if block.required_min_workers is not None
            else policy.required_min_workers
        ),
        fallback=policy.fallback,
    )
