"""Osprey's control loop as the Slurm bench runs it (bench/slurm_bench.py): production's cycle on a local Slurm."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime

from tests.slurm.cluster import LocalSlurm

from osprey_control.backends import PriorityChange
from osprey_control.backends.slurm import SlurmApplier, discover
from osprey_control.derivation import CompiledPolicy, JobMetrics, ProgressReport, derive
from osprey_control.metrics import CollectionResult, add_reservations, job_values
from osprey_control.registry import JobKey, JobRecord, JobStatus, merge_observation

__all__ = ["OspreyLoop"]


class _OnePolicy:
    """The deployed policies as the collect step looks them up: the bench deploys one."""

    def __init__(self, policy: CompiledPolicy) -> None:
        self.policy = policy

    def get(self, name: str) -> CompiledPolicy:
        if name != self.policy.name:
            raise LookupError(f"policy {name!r} is not deployed (the bench deploys {self.policy.name!r})")
        return self.policy


class OspreyLoop:
    """Discovery → collect → derive → apply, every ``interval`` seconds, until stopped: production's cycle.

    Each step is production's own: discovery's observations folded into a registry record as ingest folds
    them (``merge_observation``: status, submit time, time limit, GPUs, allocation history), the job-level
    values the collector computes from a record (``expected_runtime`` before the time limit), the
    ``reservation`` signal over the cluster's pool (``add_reservations``), derivation from the last derived
    priority, and the Slurm applier. No node metrics: nothing publishes ``gpu_utilization`` here, so that
    rule has no data, as for a job without the CloudWatch agent.

    The bench's sleep jobs stand for training jobs that use Osprey's runtime, which reports its
    ``RemainingSeconds`` (the simulator assumes it of every job): a sleep job cannot, so for a running job in
    ``durations`` the loop hands the collector the report that job would have published, its duration less
    the time it has run. Before a job starts, its budget is its ``expected_runtime``, as in production.

    A cycle that raises (slurmrestd busy or not answering on a loaded machine) is counted and the loop goes
    on at the next cycle, as production's next scheduled run does; :attr:`failures` keeps each error, so a
    run whose loop did not work is visible with its cause (:meth:`health`).
    """

    def __init__(
        self,
        slurm: LocalSlurm,
        policy: CompiledPolicy,
        interval: float,
        durations: Mapping[str, float] | None = None,
    ) -> None:
        self.slurm = slurm
        self.policy = policy
        self.interval = interval
        # Each job's true duration by name: the work its stand-in for a training job would report as done.
        self.durations = dict(durations or {})
        self.records: dict[JobKey, JobRecord] = {}
        self.writes = 0
        self.cycles = 0
        self.busy_s = 0.0  # time spent in cycles (a cycle longer than the interval delays the next)
        self.failures: list[str] = []
        self.started_at: float | None = None
        self.stopped_at: float | None = None
        self._lookup = _OnePolicy(policy)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._applier = SlurmApplier(lambda cluster: slurm.client())

    def start(self) -> None:
        self.started_at = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.started_at is None:
            return  # never started (the first submission failed)
        self._thread.join(timeout=30)
        self.stopped_at = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.cycle()
            except Exception as error:  # counted and reported (health()); the next cycle retries
                self.failures.append(f"{type(error).__name__}: {error}")
            self.busy_s += time.monotonic() - started
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    @property
    def mean_cycle_s(self) -> float:
        runs = self.cycles + len(self.failures)
        return self.busy_s / runs if runs else 0.0

    def health(self) -> str | None:
        """Why this loop's run does not show Osprey at work (None when it does): failed cycles, or far fewer
        cycles than the run's length allows (a cycle that hung)."""
        span = (self.stopped_at or time.monotonic()) - (self.started_at or time.monotonic())
        expected = span / self.interval
        problems = []
        if self.failures:
            problems.append(f"{len(self.failures)} cycles failed (first: {self.failures[0]})")
        if self.cycles < 0.5 * expected:
            problems.append(f"{self.cycles} cycles in {span:.0f} s where about {expected:.0f} were due")
        return "; ".join(problems) or None

    def cycle(self) -> None:
        now = datetime.now(UTC)
        active: list[JobRecord] = []
        for observation in discover(self.slurm.client(), self.slurm.cluster).observations:
            if observation.status not in (JobStatus.PENDING, JobStatus.RUNNING):
                continue
            observed = observation.to_observation()
            merged = merge_observation(self.records.get(observed.key), observed)
            self.records[merged.key] = merged
            active.append(merged)
        result = CollectionResult(
            metrics={
                record.key: JobMetrics(
                    record.native_id,
                    (),
                    job_values(record, end=now, progress=self._progress(record, now)),
                    backend="slurm",
                )
                for record in active
            }
        )
        add_reservations(active, result, self._lookup, now=now)
        changes = []
        for seen in active:
            decision = derive(self.policy, result.metrics[seen.key], _previous(seen))
            record = seen.model_copy(update={"derived_priority": decision.priority})
            self.records[record.key] = record
            if decision.priority != record.applied_priority:
                changes.append(PriorityChange(record, decision.priority))
        if changes:
            report = self._applier.apply(changes)
            self.writes += report.writes
            for applied in report.applied:
                key = applied.job
                self.records[key] = self.records[key].model_copy(
                    update={"applied_priority": applied.priority}
                )
        self.cycles += 1

    def _progress(self, record: JobRecord, now: datetime) -> ProgressReport | None:
        """What the job's runtime would report now (class docstring); None before it runs."""
        duration = self.durations.get(record.name)
        if record.status is not JobStatus.RUNNING or duration is None:
            return None
        ran = (now - record.status_time).total_seconds()
        return ProgressReport(remaining_s=max(0.0, duration - ran), at_s=now.timestamp())


def _previous(record: JobRecord) -> int | None:
    """The derive step's ``prev``: the last derived priority (osprey_control.steps.derive)."""
    return record.derived_priority
