"""A scheduler's record as a workload to replay, one per seed.

What the record says is kept: submit times (from the first submission), GPUs, team, priority, the declared
limit, and the time each job really ran (end - start), at most its limit (a job that ran into its limit was
ended there), as how long it holds its GPUs. What it cannot say is drawn per seed (:func:`replay_workload`'s ``seed``):

- **Running at the end of the record** (started, no end): it runs at least until the record's end. Its run time
  is drawn from the finished jobs' run times that are longer than what it has run so far (its team's when the
  team has three or more finished jobs, else everyone's), at most its limit; when no finished job ran that
  long, it ends at the record's end (a lower bound).
- **Queued at the end of the record** (no start, no end): its work is unknown; it is drawn from the finished
  jobs' run times (the same team's when it has three or more, else everyone's), at most its limit. With
  nothing finished to draw from it runs for its limit, and without a limit it is not replayed.
- **Never started** (an end but no start: cancelled or failed while queued), **no GPUs** (CPU jobs): not
  replayed. Every count is in the workload's notes.
- **Utilization** (not in any record): ``uniform(0.35, 0.95)`` per job and seed, memory bandwidth 50-90 % of
  it; **startup** is the LLM workload's (20-90 s, 3 % stragglers of 4-15 min) drawn per seed; jobs
  checkpoint every 30 min (the record does not say; a preempted job loses at most that).
- **Cluster**: the record's peak concurrent GPUs (running jobs to the record's end), in nodes of the largest
  per-host GPU count any job used (8 when none says more), unless ``gpus`` is given. A gang that is not a
  whole number of nodes is rounded up to whole nodes (counted in the notes).
- **Startup**: the record's run time already holds it, so the startup drawn for the job's first allocation
  is taken out of its work: a job holds its GPUs as long as the record says (the drawn startup still decides
  when it first trains, and every later attempt's). The declared limit is kept (at least what it held + 1 s).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from osprey.simulate.history.record import HistoryError, PastJob, SchedulerRecord
from osprey.simulate.model import Job, Workload
from osprey.simulate.workloads import LLM_STARTUP, homogeneous_nodes

__all__ = ["ReplayCounts", "replay_workload"]

CHECKPOINT_S = 1800.0
DEFAULT_NODE_GPUS = 8
_TEAM_SAMPLE = 3


@dataclass(frozen=True, slots=True)
class ReplayCounts:
    """How the record's jobs were replayed: finished, running (to the record's end), queued (work drawn),
    and not replayed (never started, no GPUs, queued with nothing to estimate from), with the cluster."""

    finished: int
    running: int
    queued: int
    never_started: int
    no_gpus: int
    unestimated: int
    rounded_up: int
    gpus: int
    gpus_from_record: bool

    @property
    def replayed(self) -> int:
        return self.finished + self.running + self.queued

    def to_dict(self) -> dict[str, int | bool]:
        return {
            "finished": self.finished,
            "running": self.running,
            "queued": self.queued,
            "never_started": self.never_started,
            "no_gpus": self.no_gpus,
            "unestimated": self.unestimated,
            "rounded_up": self.rounded_up,
            "gpus": self.gpus,
            "gpus_from_record": self.gpus_from_record,
        }


def _node_gpus(jobs: Sequence[PastJob]) -> int:
    return max([DEFAULT_NODE_GPUS, *(math.ceil(job.gpus / job.nodes) for job in jobs if job.gpus > 0)])


def _whole_nodes(gpus: int, node: int) -> int:
    return gpus if gpus <= node else node * math.ceil(gpus / node)


def peak_gpus(spans: Sequence[tuple[float, float, int]]) -> int:
    """The most GPUs held at once over ``(start, end, gpus)`` spans (a release before an allocation at a tie)."""
    events = sorted([(s, 1, g) for s, _, g in spans] + [(e, 0, -g) for _, e, g in spans])
    held = peak = 0
    for _, _, change in events:
        held += change
        peak = max(peak, held)
    return peak


def _draw(rng: random.Random, pool: Sequence[float], limit: float | None) -> float:
    value = rng.choice(pool)
    return min(value, limit) if limit else value


def replay_workload(record: SchedulerRecord, *, seed: int, gpus: int | None) -> tuple[Workload, ReplayCounts]:
    """``record`` as a workload for ``seed``; :class:`HistoryError` when nothing in it can be replayed."""
    end_of_record = record.end
    with_gpus = [job for job in record.jobs if job.gpus > 0]
    started = [job for job in with_gpus if job.start is not None]
    never = [job for job in with_gpus if job.start is None and job.end is not None]
    queued = [job for job in with_gpus if job.start is None and job.end is None]
    node = _node_gpus(with_gpus)

    def ran(job: PastJob) -> float:
        assert job.start is not None
        seconds = max(1.0, (job.end if job.end is not None else end_of_record) - job.start)
        return min(seconds, job.limit_s) if job.limit_s else seconds

    finished_runs = [ran(job) for job in started if job.end is not None]
    by_team: dict[str, list[float]] = {}
    for job in started:
        if job.end is not None:
            by_team.setdefault(job.team, []).append(ran(job))

    def pool_of(job: PastJob) -> list[float]:
        own = by_team.get(job.team, [])
        return own if len(own) >= _TEAM_SAMPLE else finished_runs

    drafts: list[tuple[PastJob, float]] = []
    for job in started:
        held = ran(job)
        if job.end is None:
            # Running: at least until the record's end; as long as a finished job that ran longer, when any did.
            longer = [value for value in pool_of(job) if value > held]
            if longer:
                held = max(held, _draw(random.Random(f"{seed}/history/{job.job_id}"), longer, job.limit_s))
        drafts.append((job, held))
    unestimated = 0
    for job in queued:
        rng = random.Random(f"{seed}/history/{job.job_id}")
        pool = pool_of(job)
        if pool:
            drafts.append((job, _draw(rng, pool, job.limit_s)))
        elif job.limit_s:
            drafts.append((job, job.limit_s))
        else:
            unestimated += 1
    if not drafts:
        raise HistoryError(
            f"{record.source}: nothing to replay: {len(record.jobs)} job(s), "
            f"{len(record.jobs) - len(with_gpus)} without GPUs, {len(never)} never started, "
            f"{unestimated} queued with no run time to estimate from"
        )
    drafts.sort(key=lambda draft: (draft[0].submit, draft[0].job_id))
    origin = drafts[0][0].submit
    rounded = sum(1 for job, _ in drafts if _whole_nodes(job.gpus, node) != job.gpus)
    cluster = gpus if gpus is not None else _peak_cluster(started, drafts, node, end_of_record)
    jobs = [_job(job, held, seed, node, origin) for job, held in drafts]
    counts = ReplayCounts(
        finished=len(finished_runs),
        running=len(started) - len(finished_runs),
        queued=len(queued) - unestimated,
        never_started=len(never),
        no_gpus=len(record.jobs) - len(with_gpus),
        unestimated=unestimated,
        rounded_up=rounded,
        gpus=cluster,
        gpus_from_record=gpus is None,
    )
    name = f"history-{record.format}" if record.format != "registry" else f"history-{record.scheduler}"
    return Workload(
        name, tuple(jobs), homogeneous_nodes(cluster, node), LLM_STARTUP, _notes(record, counts)
    ), counts


def _peak_cluster(
    started: Sequence[PastJob], drafts: Sequence[tuple[PastJob, float]], node: int, end_of_record: float
) -> int:
    """The record's peak concurrent GPUs (running jobs to its end), at least the largest job, in whole nodes."""
    spans = [
        (job.start, job.end if job.end is not None else end_of_record, _whole_nodes(job.gpus, node))
        for job in started
        if job.start is not None
    ]
    largest = max(_whole_nodes(job.gpus, node) for job, _ in drafts)
    return node * math.ceil(max(peak_gpus(spans), largest) / node)


def _job(job: PastJob, held: float, seed: int, node: int, origin: float) -> Job:
    rng = random.Random(f"{seed}/history-util/{job.job_id}")
    utilization = rng.uniform(0.35, 0.95)
    size = _whole_nodes(job.gpus, node)
    # The record's run time holds the job's startup; the simulator draws one (attempt 1 is the first
    # allocation) and adds it, so it is taken out here: the first attempt holds its GPUs as long as the
    # record says.
    startup = max(LLM_STARTUP.delays(seed, job.job_id, 1, size // node if size > node else 1))
    work = max(1.0, held - startup)
    return Job(
        job_id=job.job_id,
        submit_s=round(job.submit - origin, 3),
        gpus=size,
        duration_s=round(work, 3),
        utilization=utilization,
        memory_bandwidth=utilization * rng.uniform(0.5, 0.9),
        share=job.team,
        priority_class=job.priority_class,
        checkpoint_s=CHECKPOINT_S,
        # A second over what it held: a job that ran to its limit ends there, not one instant after.
        declared_runtime_s=max(job.limit_s, startup + work + 1.0) if job.limit_s else None,
    )


def _notes(record: SchedulerRecord, counts: ReplayCounts) -> tuple[str, ...]:
    origin = "the record's peak concurrent GPUs" if counts.gpus_from_record else "--gpus"
    lines = [
        f"{record.source}: {record.format} record replayed through {record.scheduler}: {counts.replayed} jobs "
        f"({counts.finished} finished, {counts.running} still running at the record's end and run at least to it, "
        f"{counts.queued} still queued with their run time drawn from the finished jobs')",
        f"cluster: {counts.gpus} GPUs from {origin}",
    ]
    skipped = [
        f"{counts.never_started} never started" if counts.never_started else "",
        f"{counts.no_gpus} without GPUs" if counts.no_gpus else "",
        f"{counts.unestimated} queued with no run time to estimate" if counts.unestimated else "",
    ]
    if any(skipped):
        lines.append("not replayed: " + ", ".join(part for part in skipped if part))
    if counts.rounded_up:
        lines.append(f"{counts.rounded_up} gang(s) rounded up to whole nodes")
    return (*lines, *record.notes)
