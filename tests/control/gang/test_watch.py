"""The gang watch loop over scripted readiness sequences, with its state in a moto registry table."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from osprey_control.backends.eks import KubernetesUnavailableError, NotFoundError
from osprey_control.errors import PermanentError, TransientError
from osprey_control.gang import GangPhase, GangSettings, Readiness, start
from osprey_control.gang.store import GangStore, StaleGangStateError
from osprey_control.policy import GangFallback
from osprey_control.registry.model import Backend, JobKey
from osprey_control.steps.gang_watch import WatchResult, execution_name, watch_step
from tests.control.gang.conftest import TABLE

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
KEY = JobKey(Backend.EKS, "ml/train")


@dataclass
class ScriptedBackend:
    """Answers readiness from a script; records the fallback actions it was asked for."""

    script: Iterator[Readiness]
    supports_requeue: bool = True
    actions: list[str] = field(default_factory=list)

    def readiness(self) -> Readiness:
        return next(self.script)

    def suspend(self) -> None:
        self.actions.append("suspend")

    def resume(self) -> None:
        self.actions.append("resume")

    def stop(self) -> None:
        self.actions.append("stop")


def run_watch(
    store: GangStore, settings: GangSettings, backend: ScriptedBackend, *, limit: int = 50
) -> tuple[list[WatchResult], float]:
    """Drive the loop the state machine runs: step, wait ``waitSeconds``, step ... until done."""
    now, results = T0, []
    for _ in range(limit):
        result = watch_step(KEY, settings, backend, store, now=now, policy="training")
        results.append(result)
        if result.done:
            return results, (now - T0).total_seconds()
        now += timedelta(seconds=result.wait_seconds or 0)
    raise AssertionError("the watch did not end")


def _settings(fallback: GangFallback, timeout: int = 60, max_requeues: int = 2) -> GangSettings:
    return GangSettings(
        timeout_seconds=timeout, required_min_workers=100, fallback=fallback, max_requeues=max_requeues
    )


def _metrics(results: list[WatchResult]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for result in results:
        for point in result.metrics:
            out.setdefault(point.name, []).extend(point.values)
    return out


@pytest.fixture
def store(dynamodb: Any) -> GangStore:
    return GangStore(TABLE, client=dynamodb)


def test_ready_in_time_publishes_success_and_the_wait(store: GangStore) -> None:
    backend = ScriptedBackend(iter([Readiness(1, 4), Readiness(3, 4), Readiness(4, 4)]))
    results, elapsed = run_watch(store, _settings(GangFallback.SERIAL), backend)
    assert results[-1].state.phase is GangPhase.READY
    assert elapsed == 20  # polled every min(10, 60 / 6) = 10 s
    assert _metrics(results) == {"CoSchedulingSuccessRate": [100.0], "GangWaitSeconds": [20.0]}
    assert store.load(KEY)[0] == results[-1].state


def test_timeout_then_serial(store: GangStore) -> None:
    backend = ScriptedBackend(iter([Readiness(2, 4)] * 10))
    results, elapsed = run_watch(store, _settings(GangFallback.SERIAL), backend)
    assert results[-1].state.phase is GangPhase.SERIAL
    assert elapsed == 60
    assert backend.actions == []
    assert _metrics(results) == {"CoSchedulingSuccessRate": [0.0]}


def test_timeout_then_requeue_then_ready(store: GangStore) -> None:
    script = [Readiness(2, 4)] * 7 + [Readiness(4, 4)]
    backend = ScriptedBackend(iter(script))
    results, elapsed = run_watch(store, _settings(GangFallback.REQUEUE), backend)
    assert backend.actions == ["suspend", "resume"]
    final = results[-1].state
    assert (final.phase, final.attempt, final.requeues) == (GangPhase.READY, 2, 1)
    assert elapsed == 60 + 60 + 10  # timeout, 60 s back-off, one poll
    assert _metrics(results) == {"CoSchedulingSuccessRate": [0.0], "GangWaitSeconds": [130.0]}


def test_repeated_timeouts_with_requeue_end_in_fail(store: GangStore) -> None:
    backend = ScriptedBackend(iter([Readiness(1, 4)] * 100))
    results, _ = run_watch(store, _settings(GangFallback.REQUEUE, max_requeues=2), backend)
    assert backend.actions == ["suspend", "resume", "suspend", "resume", "stop"]
    assert results[-1].state.phase is GangPhase.FAILED


def test_requeue_on_a_backend_that_cannot_requeue_runs_as_serial_and_says_why(store: GangStore) -> None:
    backend = ScriptedBackend(iter([Readiness(1, 4)] * 10), supports_requeue=False)
    results, _ = run_watch(store, _settings(GangFallback.REQUEUE), backend)
    assert results[-1].state.phase is GangPhase.SERIAL
    assert "requeue is impossible on eks, ran as serial" in results[-1].state.reason
    assert backend.actions == []


def test_a_job_cancelled_while_waiting_ends_the_watch_cleanly(store: GangStore) -> None:
    backend = ScriptedBackend(iter([Readiness(1, 4), Readiness(0, 4, finished=True, detail="job Failed")]))
    results, _ = run_watch(store, _settings(GangFallback.FAIL), backend)
    assert results[-1].state.phase is GangPhase.ENDED
    assert backend.actions == []
    assert _metrics(results) == {}


def test_a_decided_gang_is_not_watched_again(store: GangStore) -> None:
    backend = ScriptedBackend(iter([Readiness(4, 4)]))
    run_watch(store, _settings(GangFallback.SERIAL), backend)
    again = watch_step(KEY, _settings(GangFallback.SERIAL), backend, store, now=T0, policy="training")
    assert again.done
    assert again.metrics == ()  # a duplicate execution publishes nothing twice


def test_a_stale_version_is_refused(store: GangStore) -> None:
    store.save(KEY, start(T0), 0, updated_at=T0)
    with pytest.raises(StaleGangStateError):
        store.save(KEY, start(T0), 0, updated_at=T0)


def test_execution_names_are_stable_unique_and_valid_for_step_functions() -> None:
    long_id = JobKey(Backend.SAGEMAKER, "x" * 200)
    names = {execution_name(KEY), execution_name(JobKey(Backend.EKS, "ml/train2")), execution_name(long_id)}
    assert len(names) == 3
    assert execution_name(KEY) == execution_name(JobKey(Backend.EKS, "ml/train"))
    for name in names:
        assert len(name) <= 80
        assert all(c.isalnum() or c in "-_" for c in name)


class FailingBackend(ScriptedBackend):
    """Readiness raises ``error`` (what the backend's SDK or client raised)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(iter([]))
        self.error = error

    def readiness(self) -> Readiness:
        raise self.error


def _client_error(code: str, status: int) -> ClientError:
    response: Any = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "DescribeJobs")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (_client_error("ThrottlingException", 400), TransientError),
        (_client_error("InternalServerError", 500), TransientError),
        (
            KubernetesUnavailableError("GET", "/api/v1/pods", 503, "ServiceUnavailable", "busy"),
            TransientError,
        ),
        (_client_error("AccessDeniedException", 403), PermanentError),
        (NotFoundError("GET", "/apis/kueue.x-k8s.io/v1beta1", 404, "NotFound", "no Kueue"), PermanentError),
    ],
)
def test_a_failed_step_leaves_as_exactly_the_class_the_state_machine_retries_or_not(
    store: GangStore, error: Exception, expected: type[Exception]
) -> None:
    # Given a backend whose readiness call fails with ``error``
    # When the watch steps, then it raises exactly TransientError or PermanentError (Step Functions matches the
    # class name), caused by the original, and saves no state
    with pytest.raises(expected) as raised:
        watch_step(KEY, _settings(GangFallback.FAIL), FailingBackend(error), store, now=T0, policy="training")
    assert type(raised.value) is expected
    assert raised.value.__cause__ is error
    assert store.load(KEY)[0] is None


def test_a_concurrent_state_write_is_transient(store: GangStore) -> None:
    # Given another execution saved the gang state after this step read it
    class Racing(ScriptedBackend):
        def readiness(self) -> Readiness:
            store.save(KEY, start(T0), 0, updated_at=T0)
            return Readiness(1, 4)

    # When the step saves, then the stale write is a TransientError (the step is retried and reads again)
    with pytest.raises(TransientError) as raised:
        watch_step(KEY, _settings(GangFallback.FAIL), Racing(iter([])), store, now=T0, policy="training")
    assert isinstance(raised.value.__cause__, StaleGangStateError)


def test_a_bug_is_not_disguised_as_a_retryable_failure(store: GangStore) -> None:
    with pytest.raises(KeyError):
        watch_step(
            KEY, _settings(GangFallback.FAIL), FailingBackend(KeyError("x")), store, now=T0, policy="training"
        )
