"""What is simulated: jobs, the startup model of their workers, and a workload (jobs on a cluster).

Pure data, no behaviour beyond validation. Times are seconds from the workload's start.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from osprey.simulate.tenants import Tenants

__all__ = ["Job", "SimulationError", "StartupModel", "Workload"]


class SimulationError(ValueError):
    """Invalid simulator input (a job that can never be placed, a bad cluster, an unknown scheduler)."""


@dataclass(frozen=True, slots=True)
class Job:
    """One job as submitted.

    ``gpus`` is either at most one node's GPUs (one worker on one node) or a whole number of the cluster's
    largest nodes (a gang with one worker per node). ``utilization`` and ``memory_bandwidth`` (fractions
    0..1) are what the job's GPUs show while it trains: the simulated CloudWatch metrics come from them.
    ``share`` is its AWS Batch share identifier, ``priority_class`` its Kueue WorkloadPriorityClass value
    (fixed at submission). ``checkpoint_s`` is how often it checkpoints (0: never, so a preempted job
    starts over). ``declared_runtime_s`` is the runtime limit the user declared (SageMaker
    ``StoppingCondition``, Batch ``timeout``), usually an over-estimate; None when the job declares none. The
    simulated control plane reads it wherever production reads the declared limit, never ``duration_s``.
    ``expected_runtime_s`` is the user's own estimate (the Osprey block's ``expected_runtime``), which
    production reads before the declared limit; None when the user gave none. The scheduler models never
    read it (a backend enforces only the declared limit).
    """

    job_id: str
    submit_s: float
    gpus: int
    duration_s: float
    utilization: float = 0.8
    memory_bandwidth: float = 0.5
    interconnect_latency_us: float = 100.0
    share: str = "default"
    priority_class: int = 0
    checkpoint_s: float = 0.0
    declared_runtime_s: float | None = None
    expected_runtime_s: float | None = None

    def workers(self, node_size: int) -> int:
        """Workers (pods, hosts, node jobs): one per node for a multi-node gang, else one."""
        return self.gpus // node_size if self.gpus > node_size else 1

    def worker_gpus(self, node_size: int) -> int:
        return node_size if self.gpus > node_size else self.gpus


@dataclass(frozen=True, slots=True)
class StartupModel:
    """How long a worker takes from placement to training (image pull, container start, NCCL init).

    Each worker draws ``uniform(low_s, high_s)``; with probability ``straggler_p`` it is a straggler
    (a cold node, a slow image pull) and draws ``uniform(straggler_low_s, straggler_high_s)`` instead. Draws
    depend only on (seed, job, attempt, worker), so every scheduler sees the same startup for the same try.
    """

    low_s: float = 0.0
    high_s: float = 0.0
    straggler_p: float = 0.0
    straggler_low_s: float = 0.0
    straggler_high_s: float = 0.0

    def delays(self, seed: int, job_id: str, attempt: int, workers: int) -> list[float]:
        if self.high_s <= 0 and self.straggler_p <= 0:
            return [0.0] * workers
        # A string seed is hashed with SHA-512 by random.Random: stable across runs and processes.
        rng = random.Random(f"{seed}/{job_id}/{attempt}")
        delays = []
        for _ in range(workers):
            if rng.random() < self.straggler_p:
                delays.append(rng.uniform(self.straggler_low_s, self.straggler_high_s))
            else:
                delays.append(rng.uniform(self.low_s, self.high_s))
        return delays


@dataclass(frozen=True)
class Workload:
    """Jobs (sorted by submit time) on a cluster of nodes (GPUs per node).

    ``horizon_s``: the window idle % and goodput are measured over, from the first submission: the arrival
    window, or the ideal makespan (all GPU-time packed perfectly) when that is longer. ``tenants``: the teams'
    quotas and weights when the cluster is shared (``--tenants``, :mod:`osprey.simulate.tenants`).
    """

    name: str
    jobs: tuple[Job, ...]
    node_gpus: tuple[int, ...]
    startup: StartupModel = field(default_factory=StartupModel)
    notes: tuple[str, ...] = ()
    tenants: Tenants | None = None

    @property
    def total_gpus(self) -> int:
        return sum(self.node_gpus)

    @property
    def start_s(self) -> float:
        return self.jobs[0].submit_s if self.jobs else 0.0

    @property
    def horizon_s(self) -> float:
        if not self.jobs:
            return 0.0
        arrivals = self.jobs[-1].submit_s - self.jobs[0].submit_s
        ideal = sum(job.gpus * job.duration_s for job in self.jobs) / self.total_gpus
        return max(arrivals, ideal)

    def validate(self) -> None:
        """Raise :class:`SimulationError` for a cluster or a job the simulator cannot run."""
        if not self.node_gpus or min(self.node_gpus) < 1:
            raise SimulationError("the cluster needs at least one node with at least one GPU")
        largest = max(self.node_gpus)
        whole_nodes = sum(1 for gpus in self.node_gpus if gpus == largest)
        previous = float("-inf")
        for job in self.jobs:
            if job.submit_s < previous:
                raise SimulationError(f"job {job.job_id}: jobs must be sorted by submit time")
            previous = job.submit_s
            if job.gpus < 1 or job.duration_s <= 0:
                raise SimulationError(f"job {job.job_id}: needs gpus >= 1 and duration > 0")
            if job.declared_runtime_s is not None and not job.declared_runtime_s > 0:
                raise SimulationError(f"job {job.job_id}: a declared runtime must be > 0 seconds")
            if job.expected_runtime_s is not None and not job.expected_runtime_s > 0:
                raise SimulationError(f"job {job.job_id}: an expected runtime must be > 0 seconds")
            if job.gpus > largest and (job.gpus % largest or job.gpus // largest > whole_nodes):
                raise SimulationError(
                    f"job {job.job_id}: {job.gpus} GPUs is not a whole number of {largest}-GPU nodes "
                    f"this cluster has ({whole_nodes})"
                )
