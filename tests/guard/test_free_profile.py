"""Given the free GPUs over time that Slurm's backfill plans with, when jobs ask for windows and reserve them,
then each gets the first window free for its whole limit, as a step-by-step scan of the profile finds it (the
shared profile of the simulator's Slurm model and the guard's lookahead)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from osprey_control.guard import FreeProfile


def _scan(
    times: list[float], free: list[int], gpus: int, duration: float, after: float | None
) -> float | None:
    """The reference: walk the steps one by one."""
    k = 0
    while k < len(times) and after is not None and times[k] <= after:
        k += 1
    while k < len(times):
        start, end = times[k], times[k] + duration
        j = k
        while j < len(times) and times[j] < end and free[j] >= gpus:
            j += 1
        if j == len(times) or times[j] >= end:
            return start
        k = j + 1
    return None


def test_backfill_profile_finds_the_first_window_and_keeps_reservations() -> None:
    # Given 4 GPUs free now, 8 more at t=100 and 4 more at t=300 (an unlimited job never releases)
    free = FreeProfile(0.0, 4, [(100.0, 8), (300.0, 4), (math.inf, 16)])
    assert free.earliest(4, 1000.0) == 0.0
    assert free.earliest(12, 50.0) == 100.0
    assert free.earliest(16, math.inf) == 300.0
    assert free.earliest(17, 1.0) is None
    # When 12 GPUs are reserved from 100 to 400, then 4 GPUs for 100 s still fit at 0, for 200 s only at 300
    free.take(100.0, 300.0, 12)
    assert free.earliest(4, 100.0) == 0.0
    assert free.earliest(4, 200.0) == 300.0
    assert free.earliest(8, 10.0) == 400.0
    assert free.earliest(4, 10.0, after=0.0) == 300.0


# Time limits are whole seconds or more (a limit a float sum absorbs, 1e-167 s after 1 s, is no limit to plan).
durations = st.one_of(st.just(math.inf), st.just(0.0), st.floats(min_value=1.0, max_value=500.0))
requests = st.tuples(
    st.integers(min_value=1, max_value=24), durations, st.sampled_from([None, 0.0, 50.0, 250.0])
)


@settings(max_examples=300, deadline=None)
@given(
    free_now=st.integers(min_value=0, max_value=16),
    releases=st.lists(
        st.tuples(
            st.one_of(st.just(math.inf), st.floats(min_value=-50.0, max_value=600.0)), st.integers(1, 8)
        ),
        max_size=8,
    ),
    asks=st.lists(requests, min_size=1, max_size=12),
)
def test_every_window_is_the_first_a_step_by_step_scan_finds(free_now, releases, asks) -> None:
    # Given a profile from running jobs' releases (some never, some already past)
    profile = FreeProfile(0.0, free_now, releases)
    for gpus, duration, after in asks:
        # When a job asks for a window
        expected = _scan(profile.times, profile.free, gpus, duration, after)
        found = profile.earliest(gpus, duration, after=after)
        # Then it is the scan's, and taking it leaves every step's GPUs as a step-by-step reservation would
        assert found == expected
        if found is not None:
            before = list(zip(profile.times, profile.free, strict=True))
            profile.take(found, duration, gpus)
            end = found + duration
            for time, free in zip(profile.times, profile.free, strict=True):
                held = next(f for t, f in reversed(before) if t <= time)
                assert free == (held - gpus if found <= time < end else held)
