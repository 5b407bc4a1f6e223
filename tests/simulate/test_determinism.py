"""Given the same workload, scheduler and seed, the simulation gives the same numbers; another seed changes the
generated workload and the startup draws."""

from __future__ import annotations

import pytest

from osprey.simulate import SCHEDULERS, llm_workload, simulate


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_same_seed_same_result(scheduler: str) -> None:
    first = simulate(llm_workload(seed=11, jobs=30, gpus=128, load=1.2), scheduler, seed=11)
    again = simulate(llm_workload(seed=11, jobs=30, gpus=128, load=1.2), scheduler, seed=11)
    assert first.to_dict() == again.to_dict()
    assert first.waits_s == again.waits_s
    assert first.samples == again.samples


def test_another_seed_gives_another_workload_and_result() -> None:
    one, two = llm_workload(seed=1, jobs=30, gpus=128), llm_workload(seed=2, jobs=30, gpus=128)
    assert one.jobs != two.jobs
    assert simulate(one, "kueue+osprey", seed=1).to_dict() != simulate(two, "kueue+osprey", seed=2).to_dict()
