"""How long a step may keep starting work: the Lambda's remaining time less a safety margin.

Derive and apply take a :class:`Deadline` built from ``context.get_remaining_time_in_millis`` (passed as a
callable, so the logic never sees the Lambda context and tests pass a fake clock). Work that would not finish
before the margin is not started: it stays pending in the registry and the next cycle picks it up.

The margin is ``max(10 s, 10 % of the time left at the start)``: 10 s covers what still runs after the last
check (the registry writes of the jobs in flight, a botocore retry with backoff, emitting EMF and returning
the result); 10 % scales it for long timeouts, where one DynamoDB or backend call can take longer under load.
For the 300 s derive function that is 30 s.
"""

from __future__ import annotations

import math
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
        min_margin_ms: float = MIN_MARGIN_MS,
        fraction: float = MARGIN_FRACTION,
    ) -> Deadline:
        """The deadline of an invocation with ``remaining_ms()`` left now (read once for the margin)."""
        return cls(remaining_ms, max(min_margin_ms, fraction * remaining_ms()))

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
