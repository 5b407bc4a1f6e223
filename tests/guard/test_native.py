"""Standing down is a real stand-down: a pool the guard always stands down runs as its native scheduler does."""

from __future__ import annotations

import pytest

from osprey.simulate import llm_workload, make_scheduler, simulate
from osprey_control.guard import NATIVE, choose


@pytest.mark.parametrize("pair", ["slurm", "sagemaker-queue"])
def test_an_always_stood_down_pool_schedules_exactly_as_the_native_backend(pair, monkeypatch):
    # Given a guard that stands down on every cycle
    monkeypatch.setattr(choose, "_pick", lambda scores, previous, settings: (NATIVE, "forced"))
    workload = llm_workload(seed=3, jobs=60, load=1.3)
    # When the workload runs natively and with Osprey layered on the same backend
    native = simulate(workload, pair)
    layered = simulate(workload, make_scheduler(f"{pair}+osprey"))
    # Then every figure is the native one: the pinned priorities keep the native order exactly
    assert layered.mean_wait_s == pytest.approx(native.mean_wait_s)
    assert layered.idle_pct == pytest.approx(native.idle_pct)
    assert layered.goodput == pytest.approx(native.goodput)
