"""Osprey's control loop as the Slurm bench runs it (bench/slurm_bench.py): production's cycle on a local Slurm."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from tests.slurm.cluster import LocalSlurm

from bench.periodic import PeriodicLoop
from osprey_control.backends import PriorityChange
from osprey_control.backends.slurm import SlurmApplier, discover
from osprey_control.derivation import CompiledPolicy, JobMetrics, ProgressReport, derive
from osprey_control.metrics import CollectionResult, add_reservations, job_values
from osprey_control.registry import JobKey, JobRecord, JobStatus, merge_observation

__all__ = ["SlurmOspreyLoop"]


class _OnePolicy:
    """The deployed policies as the collect step looks them up: the bench deploys one."""

    def __init__(self, policy: CompiledPolicy) -> None:
        self.policy = policy

    def get(self, name: str) -> CompiledPolicy:
        if name != self.policy.name:
            raise LookupError(f"policy {name!r} is not deployed (the bench deploys {self.policy.name!r})")
        return self.policy


class SlurmOspreyLoop(PeriodicLoop):
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

    A cycle that raises (slurmrestd busy or not answering on a loaded machine) is counted and the next one
    runs (:class:`bench.periodic.PeriodicLoop`).
    """

    def __init__(
        self,
        slurm: LocalSlurm,
        policy: CompiledPolicy,
        interval: float,
        durations: Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(interval)
        self.slurm = slurm
        self.policy = policy
        # Each job's true duration by name: the work its stand-in for a training job would report as done.
        self.durations = dict(durations or {})
        self.records: dict[JobKey, JobRecord] = {}
        self.writes = 0
        self._lookup = _OnePolicy(policy)
        self._applier = SlurmApplier(lambda cluster: slurm.client())

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
