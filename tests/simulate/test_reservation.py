"""The reservation signal in the simulator: the production plan, through the production engine, on Kueue."""

from __future__ import annotations

from osprey.simulate import KueueOsprey
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
    # cluster drains around it, as the issue measured before the signal (the policy alone, without the guard)
    drained = simulate(workload, KueueOsprey(_without_yielding(policy), guard=False))
    assert drained.idle_pct > 30.0


def test_the_guard_keeps_a_draining_policy_from_idling_the_cluster() -> None:
    # Given the same policy without yielding, which drains the seed's cluster on its own (the test above)
    workload = seed_workload()
    kueue = simulate(workload, "kueue")
    # When the guard runs with it (the default)
    guarded = simulate(workload, "kueue+osprey", policy=_without_yielding(load_default_policy()))
    # Then the drain is predicted and refused: idle and goodput are no worse than native Kueue's
    assert guarded.idle_pct <= kueue.idle_pct + 0.5
    assert guarded.goodput >= 0.99 * kueue.goodput
