"""Standing down is a real stand-down: a pool the guard always stands down runs as its native scheduler does."""

from __future__ import annotations

import pytest

import osprey.simulate.guard as simulated_guard
from osprey.simulate import llm_workload, make_scheduler, simulate
from osprey_control.guard import NATIVE, choose
from osprey_control.metrics import LOOKAHEAD_LIMITS
from tests.simulate.helpers import by_id, job, run, workload


@pytest.mark.parametrize("pair", ["slurm", "sagemaker-queue", "kueue"])
def test_an_always_stood_down_pool_schedules_exactly_as_the_native_backend(pair, monkeypatch):
    # Given a guard that stands down on every cycle
    monkeypatch.setattr(choose, "_pick", lambda scores, previous, settings: (NATIVE, "forced"))
    # Then every figure is the native one: the pinned priorities keep the native order exactly
    _assert_layered_runs_as_native(pair)


def _assert_layered_runs_as_native(pair: str) -> None:
    """The LLM workload natively and with Osprey layered on the same backend: every figure is native's."""
    workload = llm_workload(seed=3, jobs=60, load=1.3)
    native = simulate(workload, pair)
    layered = simulate(workload, make_scheduler(f"{pair}+osprey"))
    assert layered.mean_wait_s == pytest.approx(native.mean_wait_s)
    assert layered.idle_pct == pytest.approx(native.idle_pct)
    assert layered.goodput == pytest.approx(native.goodput)


def test_a_pinned_queued_job_does_not_preempt_a_higher_class_job_admitted_between_two_cycles(monkeypatch):
    # Given a guard that stands down on every cycle, on 16 GPUs: a class-0 job holding 8 GPUs until 150 s, a
    # class-0 16-GPU job queued behind it (pinned at its native place), and a class-100 job of 8 GPUs that arrives
    # at 130 s and is admitted at once, still at its class value 100 when the first job ends, before the next
    # cycle writes it
    monkeypatch.setattr(choose, "_pick", lambda scores, previous, settings: (NATIVE, "forced"))
    scenario = workload(
        job("holder", 0, 8, 150, priority_class=0, declared=3600),
        job("gang", 10, 16, 3600, priority_class=0, declared=3600),
        job("higher", 130, 8, 3600, priority_class=100, declared=3600),
    )
    # When it runs natively and with Osprey pinning the native order
    native = run(scenario, "kueue")
    layered = run(scenario, make_scheduler("kueue+osprey", cycle_s=60))
    # Then the class-0 job does not preempt the class-100 one: a pin at the class value itself compares with an
    # unwritten Workload as native Kueue does (a pin in Osprey's upper half outranked it, and preempted it)
    assert [r.preemptions for r in layered.runs] == [r.preemptions for r in native.runs] == [0, 0, 0]
    assert by_id(layered) == by_id(native)


@pytest.mark.parametrize("pair", ["slurm", "sagemaker-queue", "kueue"])
def test_a_pool_too_large_to_look_ahead_schedules_exactly_as_the_native_backend(pair, monkeypatch):
    # Given a lookahead limit every pool of the workload exceeds
    monkeypatch.setattr(simulated_guard, "LOOKAHEAD_LIMITS", dict.fromkeys(LOOKAHEAD_LIMITS, 1))
    # Then Osprey, unable to check any order, keeps the native one: every figure is the native one
    _assert_layered_runs_as_native(pair)
