"""The guard's lookahead models against the simulator's models of the same backends.

Given the same jobs (whole-second submissions, exact run times, no startup delay) and the same priorities, each
lookahead model must start every job when the simulator's model of that backend does: that is what lets the
guard predict what the scheduler (as the simulator models it) will do with an order.
"""

from __future__ import annotations

import random
from collections.abc import Hashable

import pytest

from osprey.simulate import FairShare, Job, Kueue, SageMakerQueue, Simulator, Slurm, Workload
from osprey.simulate.sim import Scheduler
from osprey_control.guard import LookJob, LookPool, Model, run_forward

NODES = (8, 8, 8, 8)


def _jobs(seed: int, count: int = 24) -> tuple[Job, ...]:
    rng = random.Random(f"forward/{seed}")
    jobs = []
    submit = 0
    for index in range(count):
        submit += rng.choice((0, 0, 60, 300, 900))
        gpus = rng.choice((1, 2, 4, 8, 8, 16, 32))
        duration = float(rng.choice((600, 1800, 3600, 7200, 14400)))
        jobs.append(
            Job(
                f"j{index:02d}",
                float(submit),
                gpus,
                duration,
                share=rng.choice(("team-a", "team-b", "team-c")),
                priority_class=rng.choice((0, 100, 1000)),
                checkpoint_s=1800.0,
                declared_runtime_s=duration * rng.choice((1.0, 1.5, 3.0)),
            )
        )
    return tuple(jobs)


def _simulated_starts(jobs: tuple[Job, ...], scheduler: Scheduler) -> dict[str, float]:
    sim = Simulator(Workload("forward", jobs, NODES), scheduler)
    sim.run()
    return {run.job.job_id: run.first_train_s for run in sim.runs if run.first_train_s is not None}


def _look(jobs: tuple[Job, ...]) -> LookPool:
    return LookPool(
        sum(NODES),
        tuple(
            LookJob(
                job.job_id,
                job.gpus,
                running=False,
                remaining_s=job.duration_s,
                limit_s=job.declared_runtime_s,
                share=job.share,
                utilization=job.utilization,
                arrive_in_s=job.submit_s if job.submit_s > 0 else 0.0,
            )
            for job in jobs
        ),
        node_gpus=8,
        checkpoint_s=1800.0,
    )


CASES = [
    (Model.KUEUE, Kueue, lambda job: float(job.priority_class)),
    (Model.SLURM, Slurm, lambda job: 0.0),
    (Model.FAIRSHARE, FairShare, lambda job: 50.0),
    (Model.SAGEMAKER_QUEUE, SageMakerQueue, lambda job: float(job.priority_class)),
]


@pytest.mark.parametrize(("model", "scheduler", "priority_of"), CASES, ids=[case[0].value for case in CASES])
@pytest.mark.parametrize("seed", range(6))
def test_lookahead_starts_every_job_when_the_simulated_backend_does(model, scheduler, priority_of, seed):
    # Given jobs arriving over time on 32 GPUs, with the backend's native priorities
    jobs = _jobs(seed)
    priority: dict[Hashable, float] = {job.job_id: priority_of(job) for job in jobs}
    # When the simulator's model and the guard's lookahead each run them to the end
    simulated = _simulated_starts(jobs, scheduler())
    predicted = run_forward(model, _look(jobs), priority, horizon_s=10 * 86400.0).starts
    # Then every job starts at the same second in both (the same admission rule, the same placement)
    assert predicted.keys() == simulated.keys()
    assert {key: round(value, 6) for key, value in predicted.items()} == {
        key: round(value, 6) for key, value in simulated.items()
    }


@pytest.mark.parametrize(("lifted", "preempted"), [(None, 1), (90.0, 0)])
def test_a_predicted_arrival_once_running_sits_where_the_order_puts_it(
    lifted: float | None, preempted: int
) -> None:
    # Given 16 GPUs: a running job (8 GPUs, ends in 100 s, priority 100), a queued 16-GPU job at priority 60 that
    # cannot fit yet, and a predicted arrival of 8 GPUs in 1 s at the arrivals' priority 50, which starts at once
    pool = LookPool(
        16,
        (
            LookJob("running", 8, True, 100.0),
            LookJob("big", 16, False, 3600.0),
            LookJob("arrival", 8, False, 3600.0, arrive_in_s=1.0),
        ),
    )
    # When the order lifts a started arrival to 90 (or leaves it at 50) and the running job ends
    outcome = run_forward(
        "kueue",
        pool,
        {"running": 100.0, "big": 60.0},
        horizon_s=600.0,
        default_priority=50.0,
        arrival_once_running=lifted,
    )
    # Then the big job preempts the arrival only where the arrival stayed below it
    assert outcome.preemptions == preempted
