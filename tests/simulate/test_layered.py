"""Osprey layered on Kueue, Batch fair share and the SageMaker queue: the production engine, the production
appliers' mappings and the production gang watch, spied on, not re-implemented; the backend decides."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from osprey.simulate import (
    FairShareOsprey,
    KueueOsprey,
    SageMakerQueue,
    SageMakerQueueOsprey,
    Status,
    seed_workload,
)
from osprey.simulate import control as control_module
from osprey.simulate import gangwatch as gangwatch_module
from osprey.simulate import telemetry as telemetry_module
from osprey.simulate.runner import load_default_policy
from osprey_control.backends.eks.applier import DEFAULT_KUEUE_PRIORITY_RANGE
from osprey_control.contract import batch_scheduling_priority
from osprey_control.derivation import engine
from osprey_control.metrics.cadence import DEFAULT_EVERY_N_CYCLES
from osprey_control.policy import PriorityDerivationPolicy, policy_from_mapping
from tests.simulate.helpers import FirstTryStraggles, by_id, job, run, workload

# The module, not the function osprey_control.gang re-exports under the same name.
production_gang = importlib.import_module("osprey_control.gang.decision")


def make_policy(
    co_scheduling: dict[str, Any] | None = None, rules: list[dict[str, Any]] | None = None, **spec: Any
) -> PriorityDerivationPolicy:
    document = {
        "apiVersion": "osprey.aws/v1",
        "kind": "PriorityDerivationPolicy",
        "metadata": {"name": "sim-test"},
        "spec": {
            "derivationRules": rules
            or [
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


# Shortest declared runtime first: the job-level signal a queued job has.
SHORT_FIRST = [
    {
        "metric": "remaining_time",
        "weight": 1.0,
        "scaling": "inverse",
        "minPriority": 0,
        "maxPriority": 100,
        "range": [0, 36000],
    },
]


def test_every_cycle_derives_each_active_job_with_the_production_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a spy on the engine's derive, when the seed case runs under kueue+osprey, then every priority the
    # simulation applied is one the engine returned, and damping is the engine's.
    calls: list[tuple[str, int | None, int]] = []
    guarded: list[tuple[int | None, int]] = []
    real = engine.derive

    def spy(policy: Any, metrics: Any, previous: int | None = None, invoker: Any = None) -> Any:
        decision = real(policy, metrics, previous, invoker)
        calls.append((metrics.job_id, previous, decision.priority))
        if decision.reason == "guarded":
            guarded.append((metrics.pinned_priority, decision.priority))
        return decision

    monkeypatch.setattr(engine, "derive", spy)
    policy = load_default_policy()
    scheduler = KueueOsprey(policy)
    sim = run(seed_workload(), scheduler)

    assert len(calls) == scheduler.control.derivations > 0
    assert {job_id for job_id, _, _ in calls} == {r.job.job_id for r in sim.runs}
    changes = sum(1 for _, previous, applied in calls if applied != previous)
    assert changes == sum(r.priority_changes for r in sim.runs) > 0
    limit = policy.spec.max_priority_change
    # The engine damps every change but the guard's: a pool it stood down to the native order gets each job's
    # native priority exactly (osprey_control.guard), since the native order holds only at those values.
    assert all(pinned == applied for pinned, applied in guarded)
    damped = [(previous, applied) for _, previous, applied in calls if previous is not None]
    assert sum(1 for previous, applied in damped if abs(applied - previous) > limit) <= len(guarded)


def test_kueue_workload_priority_is_what_the_production_eks_applier_writes() -> None:
    # Given a job, when Osprey has written its priority, then the Workload's priority is KueuePriorityRange.map of it;
    # before the first write it is the job's WorkloadPriorityClass value.
    scheduler = KueueOsprey(make_policy())
    sim = run(workload(job("a", 0, 8, 600, priority_class=7)), scheduler)
    (a,) = sim.runs
    assert a.priority is not None
    assert scheduler.priority(a) == DEFAULT_KUEUE_PRIORITY_RANGE.map(a.priority)
    fresh = KueueOsprey(make_policy())
    untouched = run(workload(job("b", 0, 8, 600, priority_class=7)), fresh).runs[0]
    fresh.written.clear()
    assert fresh.priority(untouched) == 7


def test_kueue_admits_in_the_order_osprey_writes() -> None:
    # Given one 16-GPU job running and two queued 16-GPU jobs, the later one declaring a much shorter runtime,
    # when the running job ends, then Kueue admits the short one first: Osprey's written priorities order it.
    scenario = workload(
        job("running", 0, 16, 3000, declared=3600),
        job("long", 10, 16, 3000, declared=36000),
        job("short", 20, 16, 3000, declared=3600),
    )
    native = by_id(run(scenario, "kueue"))
    # The layering itself, without the guard (which refuses this policy: once running, the long job sits at 0,
    # and the next arrival would preempt it; tests/guard has the guard's own cases).
    layered = by_id(run(scenario, KueueOsprey(make_policy(rules=SHORT_FIRST), cycle_s=60, guard=False)))
    assert native["long"][1] < native["short"][1]  # BestEffortFIFO: submission order
    assert layered["short"][1] < layered["long"][1]


def test_sagemaker_queue_orders_a_share_by_the_written_scheduling_priority() -> None:
    # Given one share (team), when Osprey writes schedulingPriority, the short job goes before the long one;
    # without Osprey the queue keeps submission order (equal submission priorities).
    scenario = workload(
        job("running", 0, 16, 3000, declared=3600, share="team"),
        job("long", 10, 16, 3000, declared=36000, share="team"),
        job("short", 20, 16, 3000, declared=3600, share="team"),
    )
    native = by_id(run(scenario, SageMakerQueue()))
    # The layering itself, without the guard (which refuses this order: the long job would start later than
    # native starts it; tests/guard has the guard's own cases).
    scheduler = SageMakerQueueOsprey(make_policy(rules=SHORT_FIRST), cycle_s=60, guard=False)
    sim = run(scenario, scheduler)
    layered = by_id(sim)
    assert native["long"][1] < native["short"][1]
    assert layered["short"][1] < layered["long"][1]
    for r in sim.runs:
        assert r.priority is not None
        assert scheduler.scheduling_priority(r) == batch_scheduling_priority(r.priority)


def test_gangs_are_watched_by_the_production_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    assert vars(gangwatch_module)["decide"] is production_gang.decide
    assert vars(gangwatch_module)["start"] is production_gang.start
    seen: list[str] = []
    real = production_gang.decide

    def spy(*args: Any) -> Any:
        step = real(*args)
        seen.append(step.state.phase.value)
        return step

    monkeypatch.setattr(gangwatch_module, "decide", spy)
    scheduler = KueueOsprey(
        make_policy({"enabled": True, "gangTimeoutSeconds": 120, "requiredMinWorkers": 100})
    )
    run(workload(job("gang", 0, 16, 100)), scheduler)
    assert seen[-1] == "ready"
    assert scheduler.gangs.decided == scheduler.gangs.ready_in_time == 1


def test_requeue_fallback_suspends_an_eks_gang_with_the_production_backoff() -> None:
    # Given fallback requeue and a 120 s gang timeout, when the first try's workers need 400 s, then the
    # production decide suspends the job at 120 s, it waits the 60 s back-off and starts again.
    policy = make_policy({"enabled": True, "gangTimeoutSeconds": 120, "fallback": "requeue"})
    sim = run(workload(job("gang", 0, 16, 1000), startup=FirstTryStraggles()), KueueOsprey(policy))
    (gang,) = sim.runs
    assert gang.requeues == 1
    assert gang.first_train_s == pytest.approx(120 + 60 + 10)


def test_requeue_runs_as_serial_where_the_backend_cannot_suspend() -> None:
    # Batch and SageMaker cannot return a started job to the queue: production runs requeue as serial.
    policy = make_policy({"enabled": True, "gangTimeoutSeconds": 120, "fallback": "requeue"})
    for scheduler in (FairShareOsprey(policy), SageMakerQueueOsprey(policy)):
        sim = run(workload(job("gang", 0, 16, 1000), startup=FirstTryStraggles()), scheduler)
        assert sim.runs[0].requeues == 0
        assert sim.runs[0].first_train_s == 400


def test_fail_fallback_stops_the_job() -> None:
    policy = make_policy({"enabled": True, "gangTimeoutSeconds": 120, "fallback": "fail"})
    sim = run(workload(job("gang", 0, 16, 1000), startup=FirstTryStraggles()), KueueOsprey(policy))
    assert sim.runs[0].status is Status.FAILED
    assert sim.runs[0].end_s == 120


def test_node_metrics_are_read_at_the_deployed_cadence(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given one job training for 100 cycles and the collector's cadence (one read in 5 cycles), the simulated
    # CloudWatch is read about 20 times, not 100: production reuses a job's last values between its reads.
    reads: list[float] = []
    real = telemetry_module.node_metrics

    def spy(run: Any, rng: Any, noise: float = 3.0) -> Any:
        reads.append(noise)
        return real(run, rng, noise)

    monkeypatch.setattr(control_module, "node_metrics", spy)
    run(workload(job("long", 0, 8, 6000)), KueueOsprey(make_policy(), cycle_s=60))
    cycles = 6000 // 60
    assert cycles / DEFAULT_EVERY_N_CYCLES <= len(reads) <= cycles / DEFAULT_EVERY_N_CYCLES + 2
    assert all(noise < 3.0 for noise in reads)  # a read is the mean of the periods since the last one


def test_jobs_that_share_an_id_each_get_their_own_write() -> None:
    # Given two jobs of a user's CSV with the same job_id, when Osprey writes, both Workloads get a priority.
    scheduler = KueueOsprey(make_policy(), cycle_s=60)
    sim = run(workload(job("dup", 0, 8, 600), job("dup", 0, 8, 600)), scheduler)
    assert sorted(scheduler.written) == [r.index for r in sim.runs]
