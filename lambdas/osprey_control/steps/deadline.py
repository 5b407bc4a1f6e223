"""How long a step may keep starting work: the shorter of the Lambda's remaining time and the cycle lease's,
less a safety margin.

Every step of the cycle takes a :class:`Deadline` built from ``context.get_remaining_time_in_millis`` (passed
as a callable, so the logic never sees the Lambda context and tests pass a fake clock) and from the lease's
``expiresAt`` (epoch seconds, AcquireLease's output, passed by the state machine with the token). The lease
counts: the Lambda timeouts of a cycle add up to more than the lease, and once the lease has expired another
execution may take it, so no write of this execution may still run then (docs/control-plane.md, Fencing).
Work that would not finish before the margin is not started: it stays pending in the registry and the next
cycle picks it up. A backend write starts only if :meth:`Deadline.allows` its bound (every attempt botocore
may make, with their timeouts and backoff: :func:`osprey_control.aws.call_bound_ms`).

The margin is ``max(10 s, 10 % of the time left at the start)``: 10 s covers what still runs after the last
check (the registry writes of the jobs in flight, a botocore retry with backoff, emitting EMF and returning
the result); 10 % scales it for long timeouts, where one DynamoDB or backend call can take longer under load.
For the 300 s derive function that is 30 s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MARGIN_FRACTION", "MIN_MARGIN_MS", "Deadline"]

MIN_MARGIN_MS = 10_000.0
MARGIN_FRACTION = 0.10


@dataclass(frozen=True)
class Deadline:
    """``remaining_ms()`` is the invocation's time left (ms); ``margin_ms`` is kept free for finishing."""

    remaining_ms: Callable[[], float]
    margin_ms: float

    @classmethod
    def for_invocation(
        cls,
        remaining_ms: Callable[[], float],
        *,
        lease_expires_at: float | None = None,
        clock: Callable[[], float] = time.time,
        min_margin_ms: float = MIN_MARGIN_MS,
        fraction: float = MARGIN_FRACTION,
    ) -> Deadline:
        """The deadline of an invocation with ``remaining_ms()`` left now, and of the lease that ends at
        ``lease_expires_at`` (epoch seconds by ``clock``; None: no lease, the Lambda's time only). The margin is
        read once, from the time left at the start."""
        left = remaining_ms if lease_expires_at is None else _sooner(remaining_ms, lease_expires_at, clock)
        return cls(left, max(min_margin_ms, fraction * max(0.0, left())))

    @classmethod
    def never(cls) -> Deadline:
        """No limit: the CLI, the simulator and tests that are not about time."""
        return cls(lambda: math.inf, 0.0)

    def left_ms(self) -> float:
        """Time that may still be spent on new work."""
        return self.remaining_ms() - self.margin_ms

    def allows(self, needed_ms: float = 0.0) -> bool:
        """Whether work that may take up to ``needed_ms`` can start now and end before the margin."""
        return self.left_ms() > needed_ms

    @property
    def expired(self) -> bool:
        return not self.allows()


def _sooner(
    remaining_ms: Callable[[], float], expires_at: float, clock: Callable[[], float]
) -> Callable[[], float]:
    """The time left (ms) until the Lambda's end or the lease's expiry, whichever comes first."""

    def left() -> float:
        return min(remaining_ms(), (expires_at - clock()) * 1000.0)

    return left
