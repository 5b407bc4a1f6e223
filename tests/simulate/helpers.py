"""Tiny hand-made scenarios for the simulator tests."""

from __future__ import annotations

from dataclasses import dataclass

from osprey.simulate import Job, Scheduler, Simulator, StartupModel, Workload, make_scheduler


def job(
    job_id: str,
    submit: float,
    gpus: int,
    duration: float,
    *,
    util: float = 0.8,
    share: str = "default",
    priority_class: int = 0,
    checkpoint: float = 0.0,
    declared: float | None = None,
) -> Job:
    return Job(
        job_id,
        submit,
        gpus,
        duration,
        utilization=util,
        memory_bandwidth=util / 2,
        share=share,
        priority_class=priority_class,
        checkpoint_s=checkpoint,
        declared_runtime_s=declared,
    )


def workload(*jobs: Job, nodes: tuple[int, ...] = (8, 8), startup: StartupModel | None = None) -> Workload:
    return Workload("tiny", tuple(jobs), nodes, startup or StartupModel())


def run(scenario: Workload, scheduler: str | Scheduler, seed: int = 0) -> Simulator:
    instance = make_scheduler(scheduler, seed=seed) if isinstance(scheduler, str) else scheduler
    sim = Simulator(scenario, instance, seed=seed)
    sim.run()
    return sim


def by_id(sim: Simulator) -> dict[str, tuple[float, float, float]]:
    """job id -> (queueing delay, first training instant, end)."""
    return {r.job.job_id: (r.queued_s, r.first_train_s or -1.0, r.end_s or -1.0) for r in sim.runs}


@dataclass(frozen=True, slots=True)
class FirstTryStraggles(StartupModel):
    """Every worker takes ``first_s`` on the first attempt and ``later_s`` on every later one."""

    first_s: float = 400.0
    later_s: float = 10.0

    def delays(self, seed: int, job_id: str, attempt: int, workers: int) -> list[float]:
        return [self.first_s if attempt == 1 else self.later_s] * workers
