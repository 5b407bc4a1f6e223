"""The gang watch decision (DESIGN §7): readiness threshold, polling, timeout and each fallback."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from osprey_control.contract import parse_block
from osprey_control.gang import (
    Action,
    GangPhase,
    GangSettings,
    Readiness,
    decide,
    poll_interval_seconds,
    requeue_delay_seconds,
    resolve_settings,
    start,
)
from osprey_control.policy import CoScheduling, GangFallback

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _settings(fallback: GangFallback = GangFallback.SERIAL, **kwargs: int) -> GangSettings:
    return GangSettings(
        timeout_seconds=kwargs.get("timeout", 120),
        required_min_workers=kwargs.get("min_workers", 100),
        fallback=fallback,
        max_requeues=kwargs.get("max_requeues", 3),
    )


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(("timeout", "poll"), [(120, 10), (60, 10), (30, 5), (7, 2), (1, 1)])
def test_poll_interval_is_min_of_10_s_and_a_sixth_of_the_timeout(timeout: int, poll: int) -> None:
    assert poll_interval_seconds(timeout) == poll


def test_requeue_backoff_doubles_from_60_s_and_caps_at_an_hour() -> None:
    assert [requeue_delay_seconds(n) for n in range(1, 9)] == [60, 120, 240, 480, 960, 1920, 3600, 3600]
    assert requeue_delay_seconds(10_000) == 3600
    with pytest.raises(ValueError, match="attempt"):
        requeue_delay_seconds(0)


@pytest.mark.parametrize(
    ("ready", "requested", "min_workers", "expected"),
    [(8, 8, 100, True), (7, 8, 100, False), (6, 8, 75, True), (5, 8, 75, False), (0, 0, 50, False)],
)
def test_ready_when_ready_over_requested_reaches_the_minimum(
    ready: int, requested: int, min_workers: int, expected: bool
) -> None:
    assert _settings(min_workers=min_workers).is_ready(ready, requested) is expected


def test_job_block_overrides_the_policy_and_fallback_comes_from_the_policy() -> None:
    policy = CoScheduling(
        enabled=False, gang_timeout_seconds=600, required_min_workers=100, fallback=GangFallback.REQUEUE
    )
    block = parse_block({"priority_derivation_profile": "training", "co_schedule": True, "gang_timeout": 90})
    settings = resolve_settings(block, policy)
    assert settings == GangSettings(
        timeout_seconds=90, required_min_workers=100, fallback=GangFallback.REQUEUE
    )
    not_gang = parse_block({"priority_derivation_profile": "training"})
    assert resolve_settings(not_gang, policy) is None
    assert resolve_settings(not_gang, policy.model_copy(update={"enabled": True})) is not None


def test_given_all_workers_up_within_the_timeout_then_ready_in_time() -> None:
    settings = _settings()
    step = decide(settings, start(T0), Readiness(2, 8), at(0))
    assert (step.state.phase, step.wait_seconds, step.decided) == (GangPhase.WAITING, 10, False)
    step = decide(settings, step.state, Readiness(8, 8), at(40))
    assert step.state.phase is GangPhase.READY
    assert step.decided
    assert step.state.ready_in_time
    assert step.wait_seconds is None
    assert step.state.wait_seconds == 40


def test_the_last_poll_before_the_deadline_waits_only_until_the_deadline() -> None:
    step = decide(_settings(timeout=120), start(T0), Readiness(1, 8), at(115))
    assert step.wait_seconds == 5


def test_given_timeout_with_serial_then_the_job_runs_without_the_gang() -> None:
    step = decide(_settings(GangFallback.SERIAL), start(T0), Readiness(3, 8), at(120))
    assert step.state.phase is GangPhase.SERIAL
    assert step.action is Action.NONE
    assert step.wait_seconds is None
    assert step.decided
    assert step.state.ready_in_time is False
    assert "3/8 workers ready after 120 s" in step.state.reason


def test_given_timeout_with_fail_then_the_job_is_stopped() -> None:
    step = decide(_settings(GangFallback.FAIL), start(T0), Readiness(3, 8), at(121))
    assert (step.state.phase, step.action, step.wait_seconds) == (GangPhase.FAILED, Action.STOP, None)


def test_requeue_suspends_backs_off_resumes_and_a_later_readiness_is_not_in_time() -> None:
    settings = _settings(GangFallback.REQUEUE)
    step = decide(settings, start(T0), Readiness(3, 8), at(120))
    assert (step.state.phase, step.action, step.wait_seconds) == (GangPhase.REQUEUED, Action.SUSPEND, 60)
    assert step.decided
    assert step.state.ready_in_time is False
    early = decide(settings, step.state, None, at(150))
    assert (early.action, early.wait_seconds) == (Action.NONE, 30)
    resumed = decide(settings, step.state, None, at(180))
    assert (resumed.state.phase, resumed.action, resumed.state.attempt) == (
        GangPhase.WAITING,
        Action.RESUME,
        2,
    )
    ready = decide(settings, resumed.state, Readiness(8, 8), at(200))
    assert ready.state.phase is GangPhase.READY
    # The gang was decided once, at its first timeout: it does not count as ready in time afterwards.
    assert not ready.decided
    assert ready.state.ready_in_time is False
    assert ready.state.wait_seconds == 200


def test_repeated_timeouts_with_requeue_end_in_fail_after_max_requeues() -> None:
    settings = _settings(GangFallback.REQUEUE, max_requeues=2, timeout=60)
    state, now, delays = start(T0), 0.0, []
    for _ in range(2):
        timed_out = decide(settings, state, Readiness(1, 4), at(now + 60))
        assert timed_out.action is Action.SUSPEND
        delays.append(timed_out.wait_seconds)
        now += 60 + (timed_out.wait_seconds or 0)
        state = decide(settings, timed_out.state, None, at(now)).state
    final = decide(settings, state, Readiness(1, 4), at(now + 60))
    assert delays == [60, 120]
    assert (final.state.phase, final.action) == (GangPhase.FAILED, Action.STOP)
    assert "gave up after 2 requeues" in final.state.reason


def test_a_job_that_ends_while_waiting_ends_the_watch_without_a_decision() -> None:
    step = decide(_settings(), start(T0), Readiness(0, 8, finished=True, detail="job Stopped"), at(30))
    assert (step.state.phase, step.action, step.wait_seconds, step.decided) == (
        GangPhase.ENDED,
        Action.NONE,
        None,
        False,
    )
    assert step.state.reason == "job Stopped"


def test_a_terminal_state_never_moves_again() -> None:
    ready = decide(_settings(), start(T0), Readiness(8, 8), at(1)).state
    again = decide(_settings(), ready, Readiness(0, 8), at(500))
    assert again.state == ready
    assert again.wait_seconds is None
