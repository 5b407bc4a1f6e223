"""The osprey scheduler runs the production engine and gang watch: spied on, not re-implemented."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from osprey_control.derivation import engine
from osprey_control.policy import PriorityDerivationPolicy, policy_from_mapping
from osprey_control.simulate import Osprey, Status, seed_workload
from osprey_control.simulate import osprey as osprey_module
from osprey_control.simulate.runner import load_default_policy
from tests.simulate.helpers import FirstTryStraggles, by_id, job, run, workload

# The module, not the function osprey_control.gang re-exports under the same name.
production_gang = importlib.import_module("osprey_control.gang.decision")


def make_policy(co_scheduling: dict[str, Any] | None = None, **spec: Any) -> PriorityDerivationPolicy:
    document = {
        "apiVersion": "osprey.aws/v1",
        "kind": "PriorityDerivationPolicy",
        "metadata": {"name": "sim-test"},
        "spec": {
            "derivationRules": [
                {
                    "metric": "gpu_utilization",
                    "weight": 1.0,
                    "scaling": "linear",
                    "minPriority": 0,
                    "maxPriority": 100,
                }
            ],
            **({"coScheduling": co_scheduling} if co_scheduling else {}),
            **spec,
        },
    }
    policy, issues = policy_from_mapping(document, "test")
    assert policy is not None, issues
    return policy


def test_every_cycle_derives_each_active_job_with_the_production_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a spy on the engine's derive, when the seed case runs under osprey, then every priority the
    # simulation applied is one the engine returned, for the metrics the simulator built.
    calls: list[tuple[str, int | None, int]] = []
    real = engine.derive

    def spy(policy: Any, metrics: Any, previous: int | None = None, invoker: Any = None) -> Any:
        decision = real(policy, metrics, previous, invoker)
        calls.append((metrics.job_id, previous, decision.priority))
        return decision

    monkeypatch.setattr(engine, "derive", spy)
    scheduler = Osprey(load_default_policy())
    sim = run(seed_workload(), scheduler)

    assert len(calls) == scheduler.derivations > 0
    assert {job_id for job_id, _, _ in calls} == {r.job.job_id for r in sim.runs}
    changes = sum(1 for _, previous, applied in calls if applied != previous)
    assert changes == sum(r.priority_changes for r in sim.runs) > 0
    # Damping is the engine's: no single cycle moves a priority by more than maxPriorityChange (10).
    assert all(abs(applied - (previous or 50)) <= 10 for _, previous, applied in calls)


def test_gangs_are_watched_by_the_production_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    # The scheduler's decide/start are the production functions themselves, not copies.
    assert vars(osprey_module)["decide"] is production_gang.decide
    assert vars(osprey_module)["start"] is production_gang.start
    seen: list[str] = []
    real = production_gang.decide

    def spy(*args: Any) -> Any:
        step = real(*args)
        seen.append(step.state.phase.value)
        return step

    monkeypatch.setattr(osprey_module, "decide", spy)
    scheduler = Osprey(make_policy({"enabled": True, "gangTimeoutSeconds": 120, "requiredMinWorkers": 100}))
    run(workload(job("gang", 0, 16, 100)), scheduler)
    assert seen[-1] == "ready"
    assert scheduler.gangs_decided == scheduler.gangs_ready_in_time == 1


def test_requeue_fallback_suspends_the_gang_with_the_production_backoff() -> None:
    # Given fallback requeue and a 120 s gang timeout, when the first try's workers need 400 s, then the
    # production decide suspends the job at 120 s, it waits the 60 s back-off and starts again.
    policy = make_policy({"enabled": True, "gangTimeoutSeconds": 120, "fallback": "requeue"})
    sim = run(workload(job("gang", 0, 16, 1000), startup=FirstTryStraggles()), Osprey(policy))
    (gang,) = sim.runs
    assert gang.requeues == 1
    assert gang.first_train_s == pytest.approx(120 + 60 + 10)


def test_serial_fallback_keeps_the_allocation_and_trains_when_the_last_worker_is_up() -> None:
    policy = make_policy({"enabled": True, "gangTimeoutSeconds": 120, "fallback": "serial"})
    scheduler = Osprey(policy)
    sim = run(workload(job("gang", 0, 16, 1000), startup=FirstTryStraggles()), scheduler)
    assert sim.runs[0].requeues == 0
    assert sim.runs[0].first_train_s == 400
    assert scheduler.gangs_decided == 1
    assert scheduler.gangs_ready_in_time == 0


def test_fail_fallback_stops_the_job() -> None:
    policy = make_policy({"enabled": True, "gangTimeoutSeconds": 120, "fallback": "fail"})
    sim = run(workload(job("gang", 0, 16, 1000), startup=FirstTryStraggles()), Osprey(policy))
    assert sim.runs[0].status is Status.FAILED
    assert sim.runs[0].end_s == 120


def test_a_job_whose_derived_priority_fell_is_preempted_for_a_queued_one() -> None:
    # Given a running job at 5 % GPU utilization (the engine lowers it 10 points a cycle from 50), when a job
    # arrives that does not fit, then once the gap reaches the 20-point margin the low one is preempted.
    scenario = workload(job("idle", 0, 16, 50_000, util=0.05, checkpoint=600), job("new", 1000, 16, 100))
    with_preemption = run(scenario, Osprey(make_policy(), cycle_s=60))
    times = by_id(with_preemption)
    assert with_preemption.preemptions == 1
    assert times["new"][1] < 1100  # within two cycles of arriving
    without = run(scenario, Osprey(make_policy(), cycle_s=60, preemption=False))
    assert without.preemptions == 0
    assert by_id(without)["new"][1] == 50_000
