"""Free GPUs over time as Slurm's backfill sees them: one implementation for the simulator's Slurm model
(``osprey.simulate.slurm``) and the guard's lookahead (:mod:`osprey_control.guard.forward`), so both plan the
same reservations.

A step function from ``now`` on: ``times[k]`` starts a step with ``free[k]`` GPUs, raised as running jobs reach
their time limit and lowered by each reservation. Backfill asks it, for every pending job in priority order,
for the earliest window free for the job's whole time limit, and takes that window.

Both operations are linear in the steps, but each scan is a C-level list operation (a comprehension, then
``list.index``) instead of a Python loop over the steps: backfill asks once per pending job per pass, and the
lookahead runs a pass at every predicted event, so this is the guard's hot loop on Slurm (bench/guard_bench.py).
Pure arithmetic: no clock, no AWS.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

__all__ = ["FreeProfile"]


class FreeProfile:
    """Free GPUs from ``now`` on: ``free`` now, plus each ``(time, gpus)`` release (a running job's end by its
    time limit; an infinite time is never released, and a time before ``now`` counts from ``now``)."""

    __slots__ = ("free", "times")

    def __init__(self, now: float, free: int, releases: Iterable[tuple[float, int]]) -> None:
        self.times = [now]
        self.free = [free]
        for at, gpus in sorted(releases):
            if math.isinf(at):
                continue  # no time limit: never released as far as backfill knows
            if at > self.times[-1]:
                self.times.append(at)
                self.free.append(self.free[-1])
            self.free[-1] += gpus

    def earliest(self, gpus: int, duration: float, *, after: float | None = None) -> float | None:
        """The first step start (later than ``after``, if given) from which ``gpus`` stay free for ``duration``,
        or None when there is none. A duration so small that adding it leaves the start unchanged in floating
        point is treated as the positive window it is (the step must fit), not as an empty one; time limits are
        whole seconds, so no backfill pass meets one."""
        times = self.times
        k = 0 if after is None else bisect.bisect_right(times, after)
        if k >= len(times):
            return None
        if duration <= 0:
            return times[k]  # an empty window fits anywhere
        fits = [free >= gpus for free in self.free]
        while True:
            try:
                k = fits.index(True, k)
            except ValueError:
                return None
            # The window must hold through every step that starts before its end.
            last = bisect.bisect_left(times, times[k] + duration, k)
            try:
                short = fits.index(False, k, last)
            except ValueError:
                return times[k]
            k = short + 1  # step ``short`` is short of GPUs: no start at or before it can span it

    def take(self, start: float, duration: float, gpus: int) -> None:
        """Reserve ``gpus`` from ``start`` for ``duration`` (for ever when infinite)."""
        first = self._split(start)
        last = len(self.times) if math.isinf(duration) else self._split(start + duration)
        self.free[first:last] = [free - gpus for free in self.free[first:last]]

    def _split(self, at: float) -> int:
        """The index of the step starting at ``at`` (a new step when ``at`` falls inside one)."""
        k = bisect.bisect_right(self.times, at) - 1
        if self.times[k] == at:
            return k
        self.times.insert(k + 1, at)
        self.free.insert(k + 1, self.free[k])
        return k + 1
