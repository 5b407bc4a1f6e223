"""Kueue-style admission: whole workloads against a ClusterQueue quota, in priority order.

What is modelled (Kueue docs, kueue.sigs.k8s.io):

- **ClusterQueue** with a nominal GPU quota (default: the whole cluster) and ``queueingStrategy:
  BestEffortFIFO``: workloads are ordered by priority, then by queue timestamp; one that cannot be
  admitted does not block the ones behind it ("Cluster Queue", queueing strategies). The timestamp is a
  ``metav1.Time``, whole seconds, and Kueue breaks a tie by the Workload's UID (v0.17
  ``pkg/cache/queue/cluster_queue.go`` ``baseCompareFunc``): workloads created in the same second go in UID
  order, which is random. The model keeps whole seconds and, without UIDs, breaks ties by submission order;
  :attr:`Kueue.workload_stamps` gives it a real run's creation seconds and UIDs (``bench/kueue_bench.py``).
- **WorkloadPriorityClass**: a static integer fixed at submission (``Job.priority_class``); Kueue never
  changes it ("Workload Priority Class").
- **Preemption** ``withinClusterQueue: LowerPriority``: a workload that does not fit may evict admitted
  workloads of strictly lower priority, lowest priority first, then the most recently admitted; Kueue keeps
  only the victims it needs ("Preemption"). A preempted workload is queued again by its creation time.
- **waitForPodsReady** (timeout 5 min by default): a workload whose pods are not all Ready in time is
  evicted and requeued after ``backoffBaseSeconds · 2^(n-1)`` (60 s base, capped at ``backoffMaxSeconds``
  3600 s; no ``backoffLimitCount`` by default), ordered by its eviction time (``requeuingStrategy.timestamp:
  Eviction``) ("Setup All-or-nothing with ready Pods"). Kueue's jitter on the back-off is left out so runs
  stay deterministic.

Generous to Kueue: an admitted workload is assumed to bind at once (quota *and* a physical fit are checked
at admission), whereas real Kueue admits on quota only and may leave pods pending on a fragmented cluster.
"""

from __future__ import annotations

import math
from typing import ClassVar

from osprey.simulate.preemption import select_victims
from osprey.simulate.sim import JobRun, Scheduler, Status

__all__ = ["Kueue"]

PODS_READY = "podsready"


class Kueue(Scheduler):
    name: ClassVar[str] = "kueue"

    def __init__(
        self,
        *,
        quota_gpus: int | None = None,
        pods_ready_timeout_s: float = 300.0,
        backoff_base_s: float = 60.0,
        backoff_max_s: float = 3600.0,
        backoff_limit: int | None = None,
        preemption: bool = True,
    ) -> None:
        self.quota_gpus = quota_gpus
        self.pods_ready_timeout_s = pods_ready_timeout_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.backoff_limit = backoff_limit
        self.preemption = preemption
        self.admitted_gpus = 0
        # Per job id, its Workload's creationTimestamp (seconds on the simulation's clock) and UID, when known
        # (a real run's, to order as that Kueue did); otherwise the submission second and submission order.
        self.workload_stamps: dict[str, tuple[float, str]] = {}

    def _created(self, run: JobRun) -> float:
        stamp = self.workload_stamps.get(run.job.job_id)
        return stamp[0] if stamp else float(math.floor(run.job.submit_s))

    def _order(self, run: JobRun) -> tuple[int, float, str, int]:
        """Kueue's BestEffortFIFO order: priority (highest first), queue timestamp, UID."""
        stamp = self.workload_stamps.get(run.job.job_id)
        return (-self.priority(run), run.queue_key_s, stamp[1] if stamp else "", run.index)

    def on_arrival(self, run: JobRun, now: float) -> None:
        run.queue_key_s = self._created(run)

    def on_allocated(self, run: JobRun, now: float) -> None:
        self.admitted_gpus += run.job.gpus
        self.sim.set_timer(run, now + self.pods_ready_timeout_s, PODS_READY)

    def on_finished(self, run: JobRun, now: float) -> None:
        self.admitted_gpus -= run.job.gpus

    def on_timer(self, run: JobRun, tag: str, now: float) -> None:
        if tag != PODS_READY or run.status is not Status.STARTING:
            return  # every pod became Ready in time (or the workload is gone)
        attempt = run.requeues + 1
        if self.backoff_limit is not None and attempt > self.backoff_limit:
            self.sim.fail(run, now)  # Kueue deactivates the workload
            return
        delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
        run.queue_key_s = float(math.floor(now))  # requeuingStrategy.timestamp: Eviction (whole seconds)
        self.sim.evict(run, now, hold_until=now + delay, preempted=False)

    def priority(self, run: JobRun) -> int:
        """The Workload's ``spec.priority``: its WorkloadPriorityClass value, fixed at submission."""
        return run.job.priority_class

    def _quota_left(self) -> float:
        quota = self.sim.cluster.total if self.quota_gpus is None else self.quota_gpus
        return quota - self.admitted_gpus

    def schedule(self, now: float) -> None:
        sim = self.sim
        queued = sorted(sim.queue.values(), key=self._order)
        for run in queued:
            if run.status is not Status.QUEUED:
                continue
            if run.job.gpus <= self._quota_left() and sim.cluster.fits(run.job.gpus):
                sim.allocate(run, now)
            elif self.preemption:
                self._preempt_for(run, now)

    def _preempt_for(self, run: JobRun, now: float) -> None:
        sim = self.sim
        priority = self.priority
        wanted = priority(run)
        candidates = sorted(
            (r for r in sim.running.values() if priority(r) < wanted),
            key=lambda r: (priority(r), -(r.allocated_s or 0.0), -r.index),
        )
        if not candidates:
            return
        victims = select_victims(
            sim.cluster,
            run.job.gpus,
            candidates,
            importance=priority,
            quota_ok=lambda freed: run.job.gpus <= self._quota_left() + freed,
        )
        if victims is None:
            return
        for victim in victims:
            victim.queue_key_s = self._created(victim)  # a preempted workload keeps its creation-time place
            sim.evict(victim, now, preempted=True)
        sim.allocate(run, now)
