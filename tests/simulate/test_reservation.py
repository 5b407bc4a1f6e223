"""The reservation signal in the simulator: the production plan, through the production engine, on Kueue."""

from __future__ import annotations

from osprey.simulate.runner import load_default_policy, simulate
from osprey.simulate.workloads import seed_workload
from osprey_control.policy import PriorityDerivationPolicy


def _without_yielding(policy: PriorityDerivationPolicy) -> PriorityDerivationPolicy:
    spec = policy.spec.model_copy(
        update={"reservation": policy.spec.reservation.model_copy(update={"yield_fraction": 0.0})}
    )
    return policy.model_copy(update={"spec": spec})


def test_the_large_job_gets_its_gpus_without_a_drain_on_the_seeds_case() -> None:
    # Given the seed's case: a 64-GPU job arrives a minute after a 32-GPU job started on the 64-GPU cluster
    workload = seed_workload()
    policy = load_default_policy()
    kueue = simulate(workload, "kueue")
    # When Osprey runs with the default policy (the young 32-GPU job yields to the large one)
    layered = simulate(workload, "kueue+osprey", policy=policy)
    # Then the cluster does not drain around the large job: idle stays within the seed's 12 % and waits no longer
    assert layered.idle_pct <= 12.0
    assert layered.mean_wait_s <= kueue.mean_wait_s
    # And without yielding (opt-in) Kueue never preempts for the reservation: the large job runs last and the
    # cluster drains around it, as the issue measured before the signal
    drained = simulate(workload, "kueue+osprey", policy=_without_yielding(policy))
    assert drained.idle_pct > 30.0
