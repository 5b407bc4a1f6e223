"""Given any scheduler on a contended workload, when the simulation ends, then every GPU-second of the run is
accounted for exactly once (training + allocated-but-idle + free = GPUs x span) and the training GPU-time
is exactly the completed jobs' GPU-time plus the work thrown away by preemption."""

from __future__ import annotations

import math

import pytest

from osprey.simulate import SCHEDULERS, Status, llm_workload, seed_workload
from tests.simulate.helpers import run


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("name", ["llm", "seed"])
def test_gpu_time_is_accounted_exactly(scheduler: str, name: str) -> None:
    scenario = llm_workload(seed=3, jobs=40, gpus=128, load=1.3) if name == "llm" else seed_workload()
    sim = run(scenario, scheduler)
    ledger = sim.ledger
    span = ledger.now_s - scenario.start_s

    assert all(r.status in (Status.DONE, Status.FAILED) for r in sim.runs)
    total = ledger.training_gpu_s + ledger.allocated_idle_gpu_s + ledger.free_gpu_s
    assert math.isclose(total, scenario.total_gpus * span, rel_tol=1e-9)
    useful = math.fsum(r.job.gpus * r.job.duration_s for r in sim.runs if r.status is Status.DONE)
    assert math.isclose(ledger.training_gpu_s, useful + ledger.wasted_gpu_s, rel_tol=1e-9)
    # Nothing is left allocated, queued or counted as waiting at the end.
    assert (ledger.allocated, ledger.training, ledger.waiting_demand, ledger.queued_jobs) == (0, 0, 0, 0)
    assert sim.cluster.free_total == scenario.total_gpus
