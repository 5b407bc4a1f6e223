"""The gang watch in shadow mode: given a gang that times out, when its watch runs in shadow, then readiness is
observed and the outcome decided and recorded as ever, and no fallback (suspend, resume, stop) reaches the
backend; the state's reason says what would have been done. The SageMaker and Batch gangs run against botocore
Stubbers that hold only their reads, so a stop would fail the test."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from botocore.stub import Stubber

from osprey_control.backends.batch import BatchGang
from osprey_control.backends.sagemaker import SageMakerGang
from osprey_control.gang import GangBackend, GangPhase, Readiness
from osprey_control.gang.store import GangStore
from osprey_control.policy import GangFallback
from osprey_control.registry.model import Backend, JobKey
from osprey_control.steps.gang_watch import WatchResult, watch_step
from osprey_control.steps.mode import Mode
from tests.control.gang.conftest import TABLE
from tests.control.gang.test_backends import _batch_job, _training_job
from tests.control.gang.test_watch import T0, ScriptedBackend, _settings


def _run(store: GangStore, key: JobKey, backend: GangBackend, fallback: GangFallback) -> list[WatchResult]:
    now, results = T0, []
    for _ in range(50):
        result = watch_step(
            key, _settings(fallback), backend, store, now=now, policy="training", mode=Mode.SHADOW
        )
        results.append(result)
        if result.done:
            return results
        now += timedelta(seconds=result.wait_seconds or 0)
    raise AssertionError("the watch did not end")


def test_a_requeue_in_shadow_is_decided_and_recorded_but_never_sent(dynamodb: Any) -> None:
    # Given a gang that never forms, with the requeue fallback
    backend = ScriptedBackend(iter([Readiness(1, 4)] * 100))
    results = _run(
        GangStore(TABLE, client=dynamodb), JobKey(Backend.EKS, "ml/train"), backend, GangFallback.REQUEUE
    )
    # Then the watch went through its requeues to the end, without one suspend, resume or stop
    assert backend.actions == []
    assert [result.action.value for result in results if result.action.value != "none"] == [
        "suspend",
        "resume",
        "suspend",
        "resume",
        "stop",
    ]
    final = results[-1].state
    assert final.phase is GangPhase.FAILED
    assert "shadow: would stop, nothing written" in final.reason
    # ... and the metrics a real timeout publishes are published (the observation runs in shadow too)
    assert any(point.name == "CoSchedulingSuccessRate" for result in results for point in result.metrics)


def test_a_sagemaker_gang_in_shadow_is_read_and_never_stopped(
    dynamodb: Any, sagemaker: tuple[Any, Stubber]
) -> None:
    client, stubber = sagemaker
    # Given a 4-host training job still Starting at every look (only DescribeTrainingJob is stubbed)
    for _ in range(7):
        stubber.add_response(
            "describe_training_job",
            _training_job("InProgress", "Starting"),
            {"TrainingJobName": "llm-pretrain"},
        )
    key = JobKey(Backend.SAGEMAKER, "llm-pretrain")
    # When its watch runs to the timeout with the fail fallback in shadow
    results = _run(
        GangStore(TABLE, client=dynamodb),
        key,
        SageMakerGang("llm-pretrain", client=client),
        GangFallback.FAIL,
    )
    # Then it decided to stop, said so, and never called ListTags or StopTrainingJob (the fixture checks
    # that every stubbed read was made, and an unstubbed call would have failed the step)
    assert results[-1].state.phase is GangPhase.FAILED
    assert results[-1].state.reason.endswith("shadow: would stop, nothing written")


def test_a_batch_gang_in_shadow_is_read_and_never_terminated(
    dynamodb: Any, batch: tuple[Any, Stubber]
) -> None:
    client, stubber = batch
    for _ in range(7):
        stubber.add_response("describe_jobs", {"jobs": [_batch_job("j1", "RUNNABLE")]}, {"jobs": ["j1"]})
    results = _run(
        GangStore(TABLE, client=dynamodb),
        JobKey(Backend.BATCH, "j1"),
        BatchGang("j1", client=client),
        GangFallback.FAIL,
    )
    assert results[-1].state.phase is GangPhase.FAILED
    assert "shadow: would stop" in results[-1].state.reason
