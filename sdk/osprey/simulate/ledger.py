"""GPU-time accounting: the cluster's state is piecewise constant between events, so integrate it exactly.

Every GPU-second of the run falls in exactly one bucket: training, allocated but not training (a gang
waiting for its last workers, a job starting up), or free. Free GPU-time counts as *idle* only while a
waiting job could have used it: ``min(free GPUs, GPUs the waiting jobs still need)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from osprey.simulate.fairness import TeamAccount
from osprey.simulate.tenants import Tenants

__all__ = ["Ledger", "Sample"]


@dataclass(frozen=True, slots=True)
class Sample:
    """The cluster at ``time_s`` (until the next sample): for the plots."""

    time_s: float
    queued_jobs: int
    training_gpus: int
    allocated_gpus: int


@dataclass
class Ledger:
    """Integrals over the whole run and over the measurement window ``[start_s, start_s + horizon_s]``."""

    total_gpus: int
    start_s: float
    horizon_s: float
    tenants: Tenants | None = None
    now_s: float = 0.0
    # Current state, kept up to date by the simulator.
    allocated: int = 0
    training: int = 0
    training_util: float = 0.0  # sum of gpus x utilization of training jobs
    waiting_demand: int = 0  # GPUs the queued jobs still need
    queued_jobs: int = 0
    # Whole run (GPU-seconds).
    training_gpu_s: float = 0.0
    allocated_idle_gpu_s: float = 0.0
    free_gpu_s: float = 0.0
    # Measurement window.
    window_allocated_gpu_s: float = 0.0
    window_training_util_gpu_s: float = 0.0
    window_allocated_idle_gpu_s: float = 0.0
    window_free_idle_gpu_s: float = 0.0
    window_wasted_util_gpu_s: float = 0.0
    wasted_gpu_s: float = 0.0  # training thrown away by preemption (work after the last checkpoint)
    samples: list[Sample] = field(default_factory=list)
    # The same accounting per team (share identifier) and the fairness figure built on it.
    teams: TeamAccount = field(init=False)

    def __post_init__(self) -> None:
        self.now_s = self.start_s
        self.teams = TeamAccount(self.total_gpus, self.tenants)

    @property
    def window_end_s(self) -> float:
        return self.start_s + self.horizon_s

    def advance(self, to_s: float) -> None:
        """Account for the state held from ``now_s`` to ``to_s``."""
        dt = to_s - self.now_s
        if dt <= 0:
            return
        free = self.total_gpus - self.allocated
        self.training_gpu_s += self.training * dt
        self.allocated_idle_gpu_s += (self.allocated - self.training) * dt
        self.free_gpu_s += free * dt
        inside = min(to_s, self.window_end_s) - self.now_s
        self.teams.advance(dt, inside)
        if inside > 0:
            self.window_allocated_gpu_s += self.allocated * inside
            self.window_training_util_gpu_s += self.training_util * inside
            self.window_allocated_idle_gpu_s += (self.allocated - self.training) * inside
            self.window_free_idle_gpu_s += min(free, self.waiting_demand) * inside
        self.now_s = to_s

    def waste(self, gpus: int, seconds: float, utilization: float) -> None:
        self.wasted_gpu_s += gpus * seconds
        if self.now_s <= self.window_end_s:
            self.window_wasted_util_gpu_s += gpus * seconds * utilization

    def sample(self) -> None:
        point = Sample(self.now_s, self.queued_jobs, self.training, self.allocated)
        if self.samples:
            last = self.samples[-1]
            if last.time_s == point.time_s:
                self.samples[-1] = point
                return
            if (last.queued_jobs, last.training_gpus, last.allocated_gpus) == (
                point.queued_jobs,
                point.training_gpus,
                point.allocated_gpus,
            ):
                return  # nothing changed: keep the plots' series short
        self.samples.append(point)

    @property
    def window_gpu_s(self) -> float:
        return self.total_gpus * self.horizon_s

    @property
    def idle_fraction(self) -> float:
        if self.window_gpu_s <= 0:
            return 0.0
        return (self.window_allocated_idle_gpu_s + self.window_free_idle_gpu_s) / self.window_gpu_s

    @property
    def goodput(self) -> float:
        """Utilization-weighted useful GPU-time in the window over the window's GPU-time (0..1)."""
        if self.window_gpu_s <= 0:
            return 0.0
        useful = self.window_training_util_gpu_s - self.window_wasted_util_gpu_s
        return max(0.0, useful) / self.window_gpu_s
