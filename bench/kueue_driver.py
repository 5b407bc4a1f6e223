"""The real-Kueue half of ``bench/kueue_bench.py``: the driver that plays kubelet and training script, and
Osprey's loop writing Workload priorities (the queues and jobs it drives: ``bench/kueue_queues.py``).

- :class:`Driver`: polls the Workloads; on an admission it marks the Job's pods active and ready
  (``status.active`` = ``status.ready`` = its pods, through the Job's status subresource: what Kueue's Job
  integration reads for ``PodsReady``; the API server refuses more ready pods than active ones), so
  ``waitForPodsReady``, on in the fixture's Configuration, sees a gang that came up at once, as the simulator's
  jobs with no start-up delay do, and its timeout never fires; when Kueue evicts the Workload it takes them
  away (Kueue releases an evicted Workload's quota only once its Job has no active pod, which the Job controller
  would see to); ``duration`` seconds after the admission it marks the Workload ``Finished`` (status
  subresource), which releases its quota. A Workload that loses its admission (preempted) starts over on its
  next admission (no checkpoint, as the simulator's jobs).
- :class:`KueueOspreyLoop`: every ``interval`` seconds, each active job's job-level signals through the production
  definitions (``osprey_control.derivation.job_signals``), the production reservation plan, the real
  derivation engine, and the real :class:`~osprey_control.backends.eks.EksApplier` patching the Workload's
  ``spec.priority`` (0..1000). The job-level inputs come from what the driver records (submission, each
  admission's interval, the job's progress, as a training script reports it): the registry's view, without
  the registry. The jobs' nodes report 80 % GPU utilization (the simulator's default job profile): no
  CloudWatch agent runs here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bench.kueue_queues import GPU, KUEUE, NODE_GPUS
from bench.periodic import PeriodicLoop
from osprey_control.backends import PriorityChange
from osprey_control.backends.eks import ConflictError, EksApplier, KubernetesApiError, KubernetesClient
from osprey_control.contract import parse_block
from osprey_control.derivation import (
    RESERVATION_NOTE,
    AllocationInterval,
    CompiledPolicy,
    JobMetrics,
    NodeMetrics,
    PoolJob,
    ProgressReport,
    attained_service_gpu_hours,
    derive,
    held_seconds,
    job_level_values,
    plan_reservations,
    pool_settings,
    remaining_time_s,
    reservation_of,
)
from osprey_control.policy import Metric
from osprey_control.registry import Backend, JobRecord, JobStatus

__all__ = ["GPU", "NODE_GPUS", "Driver", "KueueOspreyLoop", "Tracked"]

CLUSTER = "bench"
_NODE_PROFILE = {
    "gpu_utilization": 80.0,
    "memory_bandwidth_utilization": 50.0,
    "node_interconnect_latency": 100.0,
}


@dataclass
class Tracked:
    """One bench job as the driver sees it. Times are seconds since the run began."""

    name: str
    uid: str
    nodes: int
    duration_s: float
    estimate_s: float
    submitted_s: float
    workload: str | None = None
    # Its Workload's creationTimestamp (whole seconds, on the run's clock) and UID: Kueue's queue order.
    stamp: tuple[float, str] | None = None
    admitted_s: float | None = None  # the current admission (None: queued)
    evictions: int = 0  # Kueue's count (status.schedulingStats), to see an eviction between two polls
    first_start_s: float | None = None
    done_s: float | None = None
    preemptions: int = 0
    evicted_by: list[str] = field(default_factory=list)  # Kueue's reason for each eviction
    pods_up: bool = False  # the driver marked its pods active and ready
    intervals: list[AllocationInterval] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.nodes * NODE_GPUS


def _conditions(obj: Mapping[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def _evictions(workload: Mapping[str, Any]) -> int:
    stats = (workload.get("status") or {}).get("schedulingStats") or {}
    return sum(int(entry.get("count", 0)) for entry in stats.get("evictions") or [])


class Driver:
    """Plays the pods and the training script of every job of one run (module docstring)."""

    def __init__(self, client: KubernetesClient, namespace: str, began: float, poll_s: float = 0.1) -> None:
        self.client = client
        self.namespace = namespace
        self.began = began
        self.poll_s = poll_s
        self.jobs: dict[str, Tracked] = {}
        self.lock = threading.Lock()
        self.pods_ready_refused: str | None = None  # the API server's answer, when it refuses status.ready
        self._finish_at: dict[str, float] = {}

    def now(self) -> float:
        return time.time() - self.began

    def add(self, job: Tracked) -> None:
        with self.lock:
            self.jobs[job.name] = job

    def done(self) -> bool:
        with self.lock:
            return all(job.done_s is not None for job in self.jobs.values())

    def poll(self) -> None:
        """One look at the Workloads: record admissions and evictions, finish what is due."""
        workloads = list(self.client.list(f"/apis/{KUEUE}/namespaces/{self.namespace}/workloads"))
        now = self.now()
        for workload in workloads:
            owners = workload["metadata"].get("ownerReferences") or []
            job = self.jobs.get(owners[0]["name"]) if owners else None
            if job is None or job.done_s is not None:
                continue
            if job.workload is None:
                meta = workload["metadata"]
                created = datetime.strptime(meta["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
                    tzinfo=UTC
                )
                job.stamp = (created.timestamp() - self.began, str(meta["uid"]))
                job.workload = meta["name"]
            conditions = _conditions(workload)
            admitted = conditions.get("Admitted") == "True" and conditions.get("Finished") != "True"
            evictions = _evictions(workload)
            if conditions.get("Evicted") == "True" and job.pods_up:
                self._pods_ready(job, 0)  # Kueue suspended the Job: its pods go (the Job controller's part)
            if job.admitted_s is not None and (not admitted or evictions > job.evictions):
                evicted = [c for c in workload["status"].get("conditions") or [] if c["type"] == "Evicted"]
                job.evicted_by.append(evicted[0]["reason"] if evicted else "admission lost")
                self._lost(job, now)
            job.evictions = evictions
            if admitted and job.admitted_s is None:
                self._admitted(job, now)
        for name, at in sorted(self._finish_at.items(), key=lambda item: item[1]):
            if at <= self.now():
                self._finish(self.jobs[name])

    def _admitted(self, job: Tracked, now: float) -> None:
        with self.lock:
            job.admitted_s = now
            job.first_start_s = now if job.first_start_s is None else job.first_start_s
            job.intervals.append(AllocationInterval(now, None, job.gpus))
        self._finish_at[job.name] = now + job.duration_s
        self._pods_ready(job, job.nodes)

    def _lost(self, job: Tracked, now: float) -> None:
        with self.lock:
            assert job.admitted_s is not None
            last = job.intervals[-1]
            job.intervals[-1] = AllocationInterval(last.start_s, now, last.gpus)
            job.admitted_s = None
            job.preemptions += 1
        self._finish_at.pop(job.name, None)
        if job.pods_up:
            self._pods_ready(job, 0)

    def _pods_ready(self, job: Tracked, pods: int) -> None:
        """``pods`` of the Job active and ready (0: gone). Kueue unsets an evicted Workload's quota only once
        its Job has no active pod, so they must go when Kueue suspends the Job."""
        path = f"/apis/batch/v1/namespaces/{self.namespace}/jobs/{job.name}/status"
        try:
            self.client.merge_patch(path, {"status": {"active": pods, "ready": pods}})
            job.pods_up = pods > 0
        except KubernetesApiError as error:  # reported by the bench; the run goes on without it
            self.pods_ready_refused = str(error)

    def _finish(self, job: Tracked) -> None:
        """Set the Workload's ``Finished`` condition (re-read and retried on 409: Kueue writes it too)."""
        assert job.workload is not None
        path = f"/apis/{KUEUE}/namespaces/{self.namespace}/workloads/{job.workload}"
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        finished = {"type": "Finished", "status": "True", "reason": "Succeeded",
                    "message": "bench driver: the job's duration elapsed", "lastTransitionTime": stamp}  # fmt: skip
        for _ in range(10):
            workload = self.client.get(path)
            status = workload.setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions") or [] if c["type"] != "Finished"]
            status["conditions"].append(finished)
            try:
                self.client.request("PUT", f"{path}/status", body=workload)
                break
            except ConflictError:
                continue
        else:
            raise RuntimeError(f"could not mark {path} Finished: it kept changing")
        now = self.now()
        with self.lock:
            last = job.intervals[-1]
            job.intervals[-1] = AllocationInterval(last.start_s, now, last.gpus)
            job.admitted_s = None
            job.done_s = now
        self._finish_at.pop(job.name, None)


class KueueOspreyLoop(PeriodicLoop):
    """Derive → apply every ``interval`` seconds for the driver's active jobs, until stopped; a failing cycle is
    counted and the next one runs (:class:`bench.periodic.PeriodicLoop`)."""

    def __init__(
        self,
        client: KubernetesClient,
        driver: Driver,
        policy: CompiledPolicy,
        interval: float,
        capacity_gpus: int,
    ) -> None:
        super().__init__(interval)
        self.driver = driver
        self.policy = policy
        self.capacity_gpus = capacity_gpus
        self.uids: dict[str, str] = {}
        self.derived: dict[str, int] = {}  # the last derived priority: the engine's ``previous``
        self.applied: dict[str, int] = {}  # the last one the applier wrote (or found in place)
        self.writes = 0
        self._applier = EksApplier(lambda cluster: client)

    def _values(self, job: Tracked, now: float) -> dict[str, float]:
        running = job.admitted_s is not None
        # A training job reports its progress (the simulator's jobs do, one step per second of work).
        progress = None
        if job.admitted_s is not None:
            progress = ProgressReport(max(0.0, job.duration_s - (now - job.admitted_s)), now)
        remaining = remaining_time_s(now_s=now, progress=progress, running=running,
                                     held_s=held_seconds(job.intervals, now), expected_runtime_s=job.estimate_s)  # fmt: skip
        return job_level_values(
            queue_wait_s=now - job.submitted_s,
            attained_gpu_hours=attained_service_gpu_hours(job.intervals, now),
            remaining_s=remaining,
            requested_gpus=job.gpus,
        )

    def _reservation(
        self, active: list[Tracked], values: dict[str, dict[str, float]], now: float
    ) -> dict[str, dict[str, str]]:
        settings = pool_settings([self.policy])
        if settings is None:
            return {}
        capacity = settings.capacity_gpus if settings.capacity_gpus is not None else self.capacity_gpus
        pool = [
            PoolJob(job.name, job.gpus, running=job.admitted_s is not None,
                    remaining_s=values[job.name].get("remaining_time"),
                    rank=float(self.derived.get(job.name, self.policy.initial_priority)),
                    waited_s=values[job.name].get("queue_wait", 0.0),
                    held_s=0.0 if job.admitted_s is None else now - job.admitted_s,
                    attempts=max(1, len(job.intervals)), may_yield=self.policy.lets_jobs_yield)
            for job in active
        ]  # fmt: skip
        plan = plan_reservations(pool, capacity, yield_fraction=settings.yield_fraction)
        notes = {}
        for job in active:
            reservation = reservation_of(plan, job.name)
            values[job.name][Metric.RESERVATION.value] = reservation.value
            notes[job.name] = {RESERVATION_NOTE: reservation.describe()}
        return notes

    def cycle(self) -> None:
        driver = self.driver
        with driver.lock:
            now = driver.now()
            active = [job for job in driver.jobs.values() if job.done_s is None]
            values = {job.name: self._values(job, now) for job in active}
            notes = self._reservation(active, values, now) if self.policy.reads_reservation else {}
            running = {job.name: job.nodes for job in active if job.admitted_s is not None}
        changes, names = [], {}
        for job in active:
            if job.workload is None:
                continue  # Kueue has not made its Workload yet: next cycle (the applier would annotate the Job)
            nodes = tuple(
                NodeMetrics(f"{job.name}/node-{i}", _NODE_PROFILE) for i in range(running.get(job.name, 0))
            )
            metrics = JobMetrics(job.name, nodes, values[job.name], notes=notes.get(job.name, {}))
            decision = derive(self.policy, metrics, self.derived.get(job.name))
            self.derived[job.name] = decision.priority
            record = JobRecord(
                backend=Backend.EKS,
                native_id=f"{CLUSTER}/{driver.namespace}/{job.name}/{job.uid}",
                name=job.name,
                block=parse_block({"priority_derivation_profile": "default-policy"}),
                status=JobStatus.RUNNING if job.name in running else JobStatus.PENDING,
                status_time=datetime.now(UTC),
                cluster=CLUSTER,
                applied_priority=self.applied.get(job.name),
            )
            changes.append(PriorityChange(record, decision.priority))
            names[record.key] = job.name
        if changes:
            report = self._applier.apply(changes)
            self.writes += report.writes
            for result in report.applied:
                self.applied[names[result.job]] = result.priority
        self.cycles += 1
