"""Build a scheduler by name and run one simulation."""

from __future__ import annotations

import logging
from collections.abc import Callable

from osprey.simulate.baselines import FairShare, Fifo, NoGang, Oracle, OracleBackfill
from osprey.simulate.cohort import CohortOracle, KueueCohort, KueueCohortOsprey
from osprey.simulate.kueue import Kueue
from osprey.simulate.layered import (
    FairShareOsprey,
    KueueOsprey,
    Layered,
    SageMakerQueue,
    SageMakerQueueOsprey,
)
from osprey.simulate.model import SimulationError, Workload
from osprey.simulate.results import Result, summarize
from osprey.simulate.sim import Scheduler, Simulator
from osprey.simulate.slurm import Slurm, SlurmOsprey
from osprey_control.policy import (
    DEFAULT_POLICY_NAME,
    PriorityDerivationPolicy,
    load_policies,
    shipped_policy_file,
)

__all__ = [
    "DEFAULT_POLICY",
    "LAYERED_PAIRS",
    "SCHEDULERS",
    "TENANT_PAIRS",
    "TENANT_SCHEDULERS",
    "load_default_policy",
    "make_scheduler",
    "simulate",
]

logger = logging.getLogger(__name__)

SCHEDULERS = (
    "fifo",
    "fairshare",
    "fairshare+osprey",
    "kueue",
    "kueue+osprey",
    "sagemaker-queue",
    "sagemaker-queue+osprey",
    "slurm",
    "slurm+osprey",
    "nogang",
    "oracle",
    "oracle-backfill",
)
# (native, layered): the pairs the scheduling goals compare (docs/scheduling.md).
LAYERED_PAIRS = (
    ("kueue", "kueue+osprey"),
    ("fairshare", "fairshare+osprey"),
    ("sagemaker-queue", "sagemaker-queue+osprey"),
    ("slurm", "slurm+osprey"),
)
# Schedulers of a shared cluster: they need the teams' quotas (a tenants file, docs/multi-tenant.md).
TENANT_SCHEDULERS = ("kueue-cohort", "kueue-cohort+osprey", "oracle-cohort")
TENANT_PAIRS = (("kueue-cohort", "kueue-cohort+osprey"),)
DEFAULT_POLICY = shipped_policy_file(DEFAULT_POLICY_NAME)


def load_default_policy() -> PriorityDerivationPolicy:
    return load_policies([DEFAULT_POLICY])[0]


def make_scheduler(
    name: str,
    *,
    policy: PriorityDerivationPolicy | None = None,
    cycle_s: float | None = None,
    seed: int = 0,
    preemption: bool = True,
) -> Scheduler:
    if name == "fifo":
        return Fifo()
    if name == "fairshare":
        return FairShare()
    if name == "kueue":
        return Kueue(preemption=preemption)
    if name == "nogang":
        return NoGang()
    if name == "oracle":
        return Oracle()
    if name == "oracle-backfill":
        return OracleBackfill()
    if name == "sagemaker-queue":
        return SageMakerQueue()
    if name == "slurm":
        return Slurm()
    if name == "kueue-cohort":
        return KueueCohort(preemption=preemption)
    if name == "oracle-cohort":
        return CohortOracle()
    chosen = policy or load_default_policy()
    if name == "kueue+osprey":
        return KueueOsprey(chosen, cycle_s=cycle_s, seed=seed, preemption=preemption)
    if name == "fairshare+osprey":
        return FairShareOsprey(chosen, cycle_s=cycle_s, seed=seed)
    if name == "sagemaker-queue+osprey":
        return SageMakerQueueOsprey(chosen, cycle_s=cycle_s, seed=seed)
    if name == "slurm+osprey":
        return SlurmOsprey(chosen, cycle_s=cycle_s, seed=seed)
    if name == "kueue-cohort+osprey":
        return KueueCohortOsprey(chosen, cycle_s=cycle_s, seed=seed, preemption=preemption)
    raise SimulationError(
        f"unknown scheduler {name!r}; allowed: {', '.join(SCHEDULERS)}, and with tenants "
        f"{', '.join(TENANT_SCHEDULERS)}"
    )


def simulate(
    workload: Workload,
    scheduler: str | Scheduler,
    *,
    policy: PriorityDerivationPolicy | None = None,
    cycle_s: float | None = None,
    seed: int = 0,
    preemption: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> Result:
    """Run ``workload`` under one scheduler (a name from :data:`SCHEDULERS` or an instance)."""
    instance = (
        make_scheduler(scheduler, policy=policy, cycle_s=cycle_s, seed=seed, preemption=preemption)
        if isinstance(scheduler, str)
        else scheduler
    )
    sim = Simulator(workload, instance, seed=seed)
    sim.run(on_progress)
    result = summarize(sim, derives_priorities=isinstance(instance, Layered))
    logger.info(
        "simulated",
        extra={"scheduler": result.scheduler, "workload": result.workload, "mean_wait_s": result.mean_wait_s},
    )
    return result
