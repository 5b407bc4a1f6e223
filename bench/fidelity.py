"""How closely the simulator's scheduler models follow a real scheduler on the same submissions (issue 29, item 4).

A real-scheduler bench (``bench/slurm_bench.py``; ``bench/kueue_bench.py`` to come) records, per job, when it was
submitted and when the scheduler started it. :func:`simulated_starts` runs the simulator's model of the same
scheduler (``slurm``, ``slurm+osprey``, ...) on the same jobs, and :func:`fidelity_line` compares the two:

    fidelity scheduler=<name> order_tau=<Kendall tau-b of the start order, sim vs real> wait_ratio=<sim/real mean wait>

Goal: ``order_tau >= 0.9`` and ``0.85 <= wait_ratio <= 1.15``. Tau-b, because a real scheduler's times are whole
seconds: jobs started in the same second tie, and tau-b counts a tie as neither agreement nor disagreement.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from osprey.simulate.model import Job, Workload
from osprey.simulate.runner import make_scheduler
from osprey.simulate.sim import Simulator
from osprey.simulate.slurm import Slurm, SlurmOsprey
from osprey_control.policy import PriorityDerivationPolicy

__all__ = ["Run", "fidelity_line", "kendall_tau_b", "noise_line", "simulated_starts"]

TAU_GOAL = 0.9
WAIT_RATIO_GOAL = (0.85, 1.15)


@dataclass(frozen=True)
class Run:
    """Per job (by the bench's job name): when it was submitted and when it started, in seconds from the start."""

    submitted: Mapping[str, float]
    started: Mapping[str, float]

    @property
    def mean_wait_s(self) -> float:
        return statistics.fmean(self.started[name] - self.submitted[name] for name in self.started)


def kendall_tau_b(first: Sequence[float], second: Sequence[float]) -> float:
    """Kendall's tau-b of two paired samples (1: the same order, -1: reversed); 1.0 when nothing is ordered."""
    if len(first) != len(second):
        raise ValueError(f"paired samples differ in length: {len(first)} and {len(second)}")
    concordant = discordant = tied_first = tied_second = 0
    for i in range(len(first)):
        for j in range(i + 1, len(first)):
            a, b = first[i] - first[j], second[i] - second[j]
            if a == 0 and b == 0:
                continue
            if a == 0:
                tied_first += 1
            elif b == 0:
                tied_second += 1
            elif (a > 0) == (b > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + tied_first) * (concordant + discordant + tied_second))
    return (concordant - discordant) / denominator if denominator else 1.0


def simulated_starts(
    scheduler: str,
    jobs: Sequence[Job],
    node_gpus: Sequence[int],
    *,
    policy: PriorityDerivationPolicy | None = None,
    cycle_s: float | None = None,
    sched_interval_s: float | None = None,
) -> Run:
    """The simulator's model ``scheduler`` on ``jobs``: each job's submission and first full allocation.

    ``sched_interval_s``: the real slurmctld's period of scheduling passes, for the ``slurm`` models (a new
    job waits for the next pass: :class:`osprey.simulate.slurm.Slurm`)."""
    workload = Workload(
        f"{scheduler} fidelity", tuple(sorted(jobs, key=lambda job: job.submit_s)), tuple(node_gpus)
    )
    workload.validate()
    model = make_scheduler(scheduler, policy=policy, cycle_s=cycle_s)
    if sched_interval_s is not None:
        if isinstance(model, SlurmOsprey):
            model = SlurmOsprey(model.control.policy, cycle_s=cycle_s, sched_interval_s=sched_interval_s)
        elif isinstance(model, Slurm):
            model = Slurm(sched_interval_s=sched_interval_s)
        else:
            raise ValueError(f"sched_interval_s: only the slurm models have one, not {scheduler!r}")
    sim = Simulator(workload, model, seed=0)
    sim.run(None)
    started = {}
    for run in sim.runs:
        first = run.intervals[0].start_s if run.intervals else run.allocated_s
        if first is None:
            raise SystemExit(f"simulated {scheduler}: job {run.job.job_id} never started")
        started[run.job.job_id] = first
    return Run({run.job.job_id: run.job.submit_s for run in sim.runs}, started)


def fidelity_line(scheduler: str, real: Run, simulated: Run) -> str:
    """The bench's ``fidelity`` line, with whether each goal is met."""
    names = sorted(real.started)
    missing = set(names) - set(simulated.started)
    if missing:
        raise ValueError(f"the simulation lacks jobs the real run has: {sorted(missing)[:5]}")
    tau = kendall_tau_b([real.started[n] for n in names], [simulated.started[n] for n in names])
    ratio = simulated.mean_wait_s / max(real.mean_wait_s, 1e-9)
    low, high = WAIT_RATIO_GOAL
    met = tau >= TAU_GOAL and low <= ratio <= high
    return (
        f"fidelity scheduler={scheduler} order_tau={tau:.2f} wait_ratio={ratio:.2f} "
        f"(goal tau>={TAU_GOAL} and {low}..{high}: {'met' if met else 'MISSED'})"
    )


# How far a real run moves a submission against the scheduler's and Osprey's clocks: sbatch's own latency on a
# loaded machine, slurmctld's scheduling passes about a second apart, and a cycle that observes a few tenths of
# a second after it starts (bench/slurm_bench.py prints its mean cycle time).
JITTER_S = 0.3
NOISE_DRAWS = 6


def noise_line(
    scheduler: str,
    jobs: Sequence[Job],
    node_gpus: Sequence[int],
    *,
    policy: PriorityDerivationPolicy | None = None,
    cycle_s: float | None = None,
    sched_interval_s: float | None = None,
    jitter_s: float = JITTER_S,
    draws: int = NOISE_DRAWS,
    base: Run | None = None,
) -> str:
    """The model against itself with every submission but the first moved by up to ``jitter_s`` (seeded
    draws): the best ``order_tau`` and ``wait_ratio`` any model could reach against a real run whose timing is
    that uncertain. A model whose own order changes with such shifts cannot match a real run job by job; its
    fidelity is then its wait ratio, and the tau of ``fidelity_line`` is read against this floor.

    ``base``: the unmoved run when the caller has simulated it already (the same arguments), so it is not run
    twice."""
    if base is None:
        base = simulated_starts(
            scheduler, jobs, node_gpus, policy=policy, cycle_s=cycle_s, sched_interval_s=sched_interval_s
        )
    names = sorted(base.started)
    first = min(jobs, key=lambda job: job.submit_s)
    taus, ratios = [], []
    for draw in range(draws):
        rng = random.Random(f"fidelity-noise/{draw}")
        moved = [
            job
            if job is first
            else replace(job, submit_s=max(first.submit_s, job.submit_s + rng.uniform(-jitter_s, jitter_s)))
            for job in jobs
        ]
        other = simulated_starts(
            scheduler, moved, node_gpus, policy=policy, cycle_s=cycle_s, sched_interval_s=sched_interval_s
        )
        taus.append(kendall_tau_b([base.started[n] for n in names], [other.started[n] for n in names]))
        ratios.append(other.mean_wait_s / max(base.mean_wait_s, 1e-9))
    return (
        f"noise scheduler={scheduler} order_tau={statistics.median(taus):.2f} "
        f"(min {min(taus):.2f}) wait_ratio={min(ratios):.2f}..{max(ratios):.2f} "
        f"(the model against itself, submissions moved by up to {jitter_s} s, {draws} draws)"
    )
