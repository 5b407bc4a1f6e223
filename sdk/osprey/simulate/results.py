"""The numbers reported per scheduler and workload (definitions in docs/scheduling.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from osprey.simulate.ledger import Sample
from osprey.simulate.sim import Simulator, Status

__all__ = ["Result", "TeamFigures", "percentile"]


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


@dataclass(frozen=True, slots=True)
class TeamFigures:
    """One team (its share identifier, ``Job.share``): mean queueing delay of its finished jobs, GPU-hours
    allocated to it in the measurement window, received / entitled GPU-time while it had queued work
    (None when it never had; see :mod:`osprey.simulate.fairness`) and, with tenants, the 95th percentile reclaim
    wait of its jobs that fitted in its unused quota when submitted (None without tenants or such jobs)."""

    team: str
    jobs: int
    mean_wait_s: float
    gpu_hours: float
    service_ratio: float | None
    p95_reclaim_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean_wait_s": round(self.mean_wait_s, 3),
            "gpu_hours": round(self.gpu_hours, 3),
            "jobs": self.jobs,
            "service_ratio": None if self.service_ratio is None else round(self.service_ratio, 4),
            "p95_reclaim_s": None if self.p95_reclaim_s is None else round(self.p95_reclaim_s, 3),
        }


@dataclass(frozen=True)
class Result:
    """One scheduler on one workload.

    Queueing delay: time a job spent not fully allocated (submit to admission, plus any time queued again
    after an eviction). Time to first step: submit → all workers training. JCT: submit → completion.
    Idle %: (allocated-but-not-training GPU-time + free GPU-time a waiting job could have used) over the
    cluster's GPU-time in the measurement window. Goodput: utilization-weighted useful training GPU-time in
    the window over the window's GPU-time (0..1; preempted work that was thrown away does not count).
    Fairness: Jain's index over teams of GPU-time received / entitled while the team had queued work
    (:mod:`osprey.simulate.fairness`), entitled by an equal split or, with tenants, by the configured quotas
    (``entitlement``: ``equal`` or ``quota``); ``teams`` gives each team's figures, sorted by name.
    """

    scheduler: str
    workload: str
    jobs: int
    completed: int
    failed: int
    mean_wait_s: float
    p95_wait_s: float
    mean_first_step_s: float
    mean_jct_s: float
    idle_pct: float
    goodput: float
    preemptions: int
    requeues: int
    priority_changes_per_job_hour: float | None
    makespan_s: float
    gpus: int
    horizon_s: float
    fairness: float = 1.0
    entitlement: str = "equal"
    teams: tuple[TeamFigures, ...] = ()
    waits_s: tuple[float, ...] = field(repr=False, default=())
    samples: tuple[Sample, ...] = field(repr=False, default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler,
            "workload": self.workload,
            "gpus": self.gpus,
            "jobs": self.jobs,
            "completed": self.completed,
            "failed": self.failed,
            "mean_wait_s": round(self.mean_wait_s, 3),
            "p95_wait_s": round(self.p95_wait_s, 3),
            "mean_first_step_s": round(self.mean_first_step_s, 3),
            "mean_jct_s": round(self.mean_jct_s, 3),
            "idle_pct": round(self.idle_pct, 3),
            "goodput": round(self.goodput, 4),
            "preemptions": self.preemptions,
            "requeues": self.requeues,
            "priority_changes_per_job_hour": (
                None
                if self.priority_changes_per_job_hour is None
                else round(self.priority_changes_per_job_hour, 4)
            ),
            "makespan_s": round(self.makespan_s, 3),
            "horizon_s": round(self.horizon_s, 3),
            "fairness": round(self.fairness, 4),
            "entitlement": self.entitlement,
            "teams": {figures.team: figures.to_dict() for figures in self.teams},
        }


def team_figures(sim: Simulator) -> tuple[TeamFigures, ...]:
    """Per team: its finished jobs' mean queueing delay, window GPU-hours and service ratio."""
    waits: dict[str, list[float]] = {}
    jobs: dict[str, int] = {}
    for run in sim.runs:
        team = run.job.share
        jobs[team] = jobs.get(team, 0) + 1
        waits.setdefault(team, [])
        if run.status in (Status.DONE, Status.FAILED):
            waits[team].append(run.queued_s)
    account = sim.ledger.teams
    reclaims = account.reclaim_waits_s
    return tuple(
        TeamFigures(
            team=team,
            jobs=jobs[team],
            mean_wait_s=_mean(waits[team]),
            gpu_hours=account.window_allocated_gpu_s.get(team, 0.0) / 3600.0,
            service_ratio=account.service_ratio(team),
            p95_reclaim_s=percentile(reclaims[team], 0.95) if reclaims.get(team) else None,
        )
        for team in sorted(waits)
    )


def summarize(sim: Simulator, *, derives_priorities: bool) -> Result:
    runs = sim.runs
    finished = [r for r in runs if r.status in (Status.DONE, Status.FAILED)]
    done = [r for r in finished if r.status is Status.DONE]
    waits = tuple(r.queued_s for r in finished)
    first_steps = [r.first_train_s - r.job.submit_s for r in done if r.first_train_s is not None]
    jcts = [r.end_s - r.job.submit_s for r in done if r.end_s is not None]
    changes = None
    if derives_priorities:
        job_hours = math.fsum((r.end_s or r.job.submit_s) - r.job.submit_s for r in finished) / 3600.0
        changes = sum(r.priority_changes for r in runs) / job_hours if job_hours > 0 else 0.0
    ledger = sim.ledger
    end = max((r.end_s or 0.0 for r in finished), default=sim.workload.start_s)
    return Result(
        scheduler=sim.scheduler.name,
        workload=sim.workload.name,
        jobs=len(runs),
        completed=len(done),
        failed=len(finished) - len(done),
        mean_wait_s=_mean(waits),
        p95_wait_s=percentile(waits, 0.95),
        mean_first_step_s=_mean(first_steps),
        mean_jct_s=_mean(jcts),
        idle_pct=100.0 * ledger.idle_fraction,
        goodput=ledger.goodput,
        preemptions=sim.preemptions,
        requeues=sum(r.requeues for r in runs),
        priority_changes_per_job_hour=changes,
        makespan_s=end - sim.workload.start_s,
        gpus=sim.workload.total_gpus,
        horizon_s=ledger.horizon_s,
        fairness=ledger.teams.fairness,
        entitlement="equal" if sim.workload.tenants is None else "quota",
        teams=team_figures(sim),
        waits_s=waits,
        samples=tuple(ledger.samples),
    )
