"""A record replayed under several schedulers and seeds: each scheduler's figures as the mean over the seeds,
with their spread (min, max): the seeds vary only what the record does not say (startup, utilization, the
run time of a job still queued)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from osprey.simulate.history.record import SchedulerRecord
from osprey.simulate.history.replay import ReplayCounts, replay_workload
from osprey.simulate.model import Workload
from osprey.simulate.results import Result, TeamFigures
from osprey.simulate.runner import simulate
from osprey_control.policy import PriorityDerivationPolicy

__all__ = ["SPREAD_FIELDS", "Replay", "replay_record"]

# The figures whose spread over seeds is reported (Result attribute names).
SPREAD_FIELDS = (
    "mean_wait_s",
    "p95_wait_s",
    "mean_first_step_s",
    "mean_jct_s",
    "idle_pct",
    "goodput",
    "fairness",
)
_MEANS = (*SPREAD_FIELDS, "makespan_s", "horizon_s")
_COUNTS = ("completed", "failed", "preemptions", "requeues")


@dataclass(frozen=True)
class Replay:
    """One record replayed: the first seed's workload (for plots and notes), how its jobs were replayed, and
    per scheduler the mean result and each seed's."""

    record: SchedulerRecord
    workload: Workload
    counts: ReplayCounts
    seeds: tuple[int, ...]
    means: tuple[Result, ...]
    per_seed: dict[str, tuple[Result, ...]]

    def spread(self, scheduler: str) -> dict[str, tuple[float, float]]:
        results = self.per_seed[scheduler]
        return {
            name: (min(getattr(r, name) for r in results), max(getattr(r, name) for r in results))
            for name in SPREAD_FIELDS
        }

    def to_dict(self, mean: Result) -> dict[str, Any]:
        """``mean.to_dict()`` with the record (format, source, counts), the seeds and each figure's spread."""
        return {
            **mean.to_dict(),
            "history": {"format": self.record.format, "source": self.record.source, **self.counts.to_dict()},
            "seeds": list(self.seeds),
            "spread": {
                name: [round(low, 4), round(high, 4)]
                for name, (low, high) in self.spread(mean.scheduler).items()
            },
        }


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def mean_result(results: Sequence[Result]) -> Result:
    """The seeds' mean of every figure; waits and samples (the CDF and time-series plots) are the first seed's."""
    first = results[0]
    changes = [
        r.priority_changes_per_job_hour for r in results if r.priority_changes_per_job_hour is not None
    ]
    teams = []
    for index, team in enumerate(first.teams):
        same = [r.teams[index] for r in results if len(r.teams) > index and r.teams[index].team == team.team]
        ratios = [t.service_ratio for t in same if t.service_ratio is not None]
        teams.append(
            TeamFigures(
                team=team.team,
                jobs=team.jobs,
                mean_wait_s=_mean([t.mean_wait_s for t in same]),
                gpu_hours=_mean([t.gpu_hours for t in same]),
                service_ratio=_mean(ratios) if ratios else None,
            )
        )
    figures: dict[str, Any] = {name: _mean([getattr(r, name) for r in results]) for name in _MEANS}
    figures.update({name: round(_mean([getattr(r, name) for r in results])) for name in _COUNTS})
    return replace(
        first,
        **figures,
        priority_changes_per_job_hour=_mean(changes) if changes else None,
        teams=tuple(teams),
    )


def replay_record(
    record: SchedulerRecord,
    schedulers: Sequence[str],
    seeds: Sequence[int],
    *,
    gpus: int | None,
    policy: PriorityDerivationPolicy | None = None,
    cycle_s: float | None = None,
    on_run: Callable[[str, int], None] | None = None,
) -> Replay:
    """Replay ``record`` under each scheduler for each seed (:class:`HistoryError` when it has nothing to
    replay, :class:`SimulationError` when a job cannot fit the cluster)."""
    workloads = [replay_workload(record, seed=seed, gpus=gpus) for seed in seeds]
    first, counts = workloads[0]
    first.validate()
    per_seed: dict[str, tuple[Result, ...]] = {}
    for name in schedulers:
        runs = []
        for seed, (workload, _) in zip(seeds, workloads, strict=True):
            if on_run is not None:
                on_run(name, seed)
            runs.append(simulate(workload, name, policy=policy, cycle_s=cycle_s, seed=seed))
        per_seed[name] = tuple(runs)
    means = tuple(mean_result(per_seed[name]) for name in schedulers)
    return Replay(record, first, counts, tuple(seeds), means, per_seed)
