"""The baselines without priorities of their own: FIFO and fair share (AWS Batch), no gang (plain
kube-scheduler), and the two oracles. Kueue is in :mod:`osprey.simulate.kueue`.

Each one is generous to itself where the real system's behaviour is not fully documented (noted below), so
the comparison never rests on a weakened baseline.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

from osprey.simulate.cluster import SimulatedCluster
from osprey.simulate.sim import JobRun, Scheduler, Simulator, Status

__all__ = ["FairShare", "Fifo", "NoGang", "Oracle", "OracleBackfill"]


class Fifo(Scheduler):
    """AWS Batch job queue without a scheduling policy: jobs start in submission order, and the job at the
    head blocks every job behind it while it cannot be placed (head-of-line blocking). A multi-node parallel
    job gets all its nodes together. Source: AWS Batch User Guide, "Job queues" (a queue without a
    scheduling policy is first-in, first-out) and "Multi-node parallel jobs"."""

    name: ClassVar[str] = "fifo"

    def schedule(self, now: float) -> None:
        for run in list(self.sim.queue.values()):
            if not self.sim.allocate(run, now):
                return  # the head cannot start: everything behind it waits


@dataclass
class ShareUsage:
    """One share identifier's usage: GPUs held, averaged with an exponential decay of ``decay_s``.

    ``usage(t) = ∫ gpus(τ) e^{-(t-τ)/D} dτ / D``, updated exactly between changes (gpus is constant there).
    With ``D = 0`` only current usage counts, as the Batch docs say for ``shareDecaySeconds: 0``.
    """

    decay_s: float
    gpus: int = 0
    decayed: float = 0.0
    updated_s: float = 0.0

    def usage(self, now: float) -> float:
        if self.decay_s <= 0:
            return float(self.gpus)
        factor = math.exp(-(now - self.updated_s) / self.decay_s)
        return self.decayed * factor + self.gpus * (1.0 - factor)

    def change(self, now: float, delta: int) -> None:
        self.decayed = self.usage(now)
        self.updated_s = now
        self.gpus += delta


class FairShare(Scheduler):
    """AWS Batch fair-share scheduling policy: the next job comes from the share identifier with the lowest
    usage x ``weightFactor`` (a lower weight factor gets more: 0.125 gets 8x what 1.0 gets), usage decayed
    over ``shareDecaySeconds``; within a share, submission order. A share whose next job cannot be placed
    does not hold up the other shares (Batch documents no cross-share blocking, so none is assumed).
    Source: AWS Batch User Guide, "Fair-share scheduling policies" and the ``FairsharePolicy`` API
    (``shareDecaySeconds``, ``shareDistribution[].weightFactor``)."""

    name: ClassVar[str] = "fairshare"

    def __init__(self, share_decay_s: float = 3600.0, weight_factors: dict[str, float] | None = None) -> None:
        self.share_decay_s = share_decay_s
        self.weight_factors = dict(weight_factors or {})
        self.team_weight_factors: dict[str, float] = {}  # from the tenants file, once bound
        self._shares: dict[str, ShareUsage] = {}

    def _share(self, name: str) -> ShareUsage:
        if name not in self._shares:
            self._shares[name] = ShareUsage(self.share_decay_s)
        return self._shares[name]

    # -- what a queue built on fair share decides differently (the layered schedulers override these) ------
    def share_of(self, run: JobRun) -> str:
        """The job's share identifier."""
        return run.job.share

    def bind(self, sim: Simulator) -> None:
        super().bind(sim)
        tenants = sim.workload.tenants
        self.team_weight_factors = {} if tenants is None else tenants.weight_factors()

    def weight_of(self, share: str) -> float:
        """The share's ``weightFactor``: the policy's entry, else its team's from the tenants file
        (``1 / fairShareWeight``), else 1.0."""
        factor = self.weight_factors.get(share)
        return factor if factor is not None else self.team_weight_factors.get(share, 1.0)

    def tiebreak(self, share: str, head: JobRun) -> tuple[float, ...] | str:
        """Order between shares of equal weighted usage (Batch documents none; here the identifier)."""
        return share

    def within_share(self, runs: list[JobRun]) -> list[JobRun]:
        """Order of a share's queued jobs (here submission order, the order they entered the queue)."""
        return runs

    def on_allocated(self, run: JobRun, now: float) -> None:
        self._share(self.share_of(run)).change(now, run.job.gpus)

    def on_finished(self, run: JobRun, now: float) -> None:
        # Completed, failed or evicted: the job's GPUs stop counting as its share's usage now.
        self._share(self.share_of(run)).change(now, -run.job.gpus)

    def schedule(self, now: float) -> None:
        heads: dict[str, list[JobRun]] = defaultdict(list)
        for run in self.sim.queue.values():
            heads[self.share_of(run)].append(run)
        for share, runs in heads.items():
            heads[share] = self.within_share(runs)
        # Within one instant only the share that just started a job changes its usage, so a heap keyed on
        # (weighted usage, tie-break) picks the same share as a scan of every share, in O(log shares).
        positions = dict.fromkeys(heads, 0)
        ready = [self._key(share, heads[share][0], now) for share in heads]
        heapq.heapify(ready)
        while ready and self.sim.cluster.free_total > 0:
            *_, share = heapq.heappop(ready)
            run = heads[share][positions[share]]
            if not self.sim.allocate(run, now):
                continue  # the share's head does not fit: that share waits, the others go on
            positions[share] += 1
            if positions[share] < len(heads[share]):
                heapq.heappush(ready, self._key(share, heads[share][positions[share]], now))

    def _key(self, share: str, head: JobRun, now: float) -> tuple[float, tuple[float, ...] | str, str]:
        return (self._share(share).usage(now) * self.weight_of(share), self.tiebreak(share, head), share)


class NoGang(Scheduler):
    """The default Kubernetes scheduler without gang scheduling: every worker (pod) is bound on its own, in
    submission order, as soon as a node has room; pods that do not fit are skipped, not waited for. A job
    trains only once all its workers are up, so a partly placed gang holds GPUs that do nothing (the seed's
    "one worker training while 63 sit idle"). Source: Kubernetes docs, "Kubernetes Scheduler" (pods are
    scheduled one at a time) and the coscheduling KEP/plugin that exists because of this."""

    name: ClassVar[str] = "nogang"

    def schedule(self, now: float) -> None:
        for run in list(self.sim.queue.values()):
            while self.sim.cluster.free_total >= run.worker_gpus and self.sim.place_worker(run, now):
                pass
            if self.sim.cluster.free_total == 0:
                return


class Oracle(Scheduler):
    """Not a real scheduler: a reference bound. Knows every job's duration and starts, among the waiting
    jobs, the one with the least remaining GPU-time (GPUs x remaining seconds) first, skipping any that does
    not fit (whole-job placement). Non-preemptive: preempting would throw away work. Skipping makes it
    greedy: every job that fits starts, with no reservation, so a large job waits for as long as smaller
    ones keep taking the GPUs it would need (:class:`OracleBackfill` reserves for it)."""

    name: ClassVar[str] = "oracle"

    @staticmethod
    def order(run: JobRun) -> tuple[float, float, int]:
        """Least remaining GPU-time first; ties by submission (then index, so the order is total)."""
        return (run.job.gpus * run.remaining_s, run.job.submit_s, run.index)

    def schedule(self, now: float) -> None:
        queued = sorted(self.sim.queue.values(), key=self.order)
        for run in queued:
            if self.sim.cluster.free_total == 0:
                return
            if run.job.gpus <= self.sim.cluster.free_total:
                self.sim.allocate(run, now)


def _replica(cluster: SimulatedCluster) -> SimulatedCluster:
    """A copy of ``cluster``'s free GPUs per node, to try placements on without touching the real one."""
    copy = SimulatedCluster(cluster.capacity)
    copy.take(
        [
            (node, gpus - cluster.free_on(node))
            for node, gpus in enumerate(cluster.capacity)
            if cluster.free_on(node) < gpus
        ]
    )
    return copy


class OracleBackfill(Oracle):
    """Not a real scheduler: the backfilling reference bound. EASY backfilling (Lifka 1995) with *exact*
    run times on the oracle's order (least remaining GPU-time first). Every job that can be placed starts in
    that order up to the first that cannot, the head; the head is reserved the earliest instant at which the
    exactly known ends of running jobs leave it placeable (its shadow time); a later job then starts now if it
    can be placed and either ends by the shadow time or leaves the head placeable at it (the "extra" GPUs).
    Non-preemptive; a running job's end is exact because it knows the startup delays and durations.

    Fit is judged on nodes, not GPU counts, because the two differ on a fragmented cluster: a 16-GPU gang
    needs two *whole* free nodes, so 16 free GPUs spread over three nodes do not make a shadow time, and a
    4-GPU job within the count of extra GPUs may land (best fit) on a node the head needs. So the shadow time
    is the first end after which the cluster's own placement rule finds room for the head on the projected
    nodes, and a job that would still hold GPUs then starts only if the head still fits beside its exact
    allocation (the one ``sim.allocate`` will make, tried first on a replica). The scheduler cannot choose a
    job's nodes (the cluster's best fit does), so a job that would land on a node the head needs waits even
    when another node would have done; that errs towards never delaying the head."""

    name: ClassVar[str] = "oracle-backfill"

    def schedule(self, now: float) -> None:
        sim = self.sim
        queued = sorted(sim.queue.values(), key=self.order)
        for position, run in enumerate(queued):
            if not sim.allocate(run, now):
                self._backfill(run, queued[position + 1 :], now)
                return

    def _end(self, run: JobRun) -> float:
        """When a running job ends, to the float the simulator will use (its TRAIN, then COMPLETE, event)."""
        if run.status is Status.TRAINING:
            assert run.train_started_s is not None  # set when it started training
            return run.train_started_s + run.remaining_s
        assert run.allocated_s is not None  # a starting job was allocated
        return max(*run.ready_at, run.allocated_s) + run.remaining_s

    def _end_if_started(self, run: JobRun, now: float) -> float:
        """When a queued job would end if placed now: its next attempt's startup delays, then its duration
        (the simulator draws them from (seed, job, attempt, worker), so they are known before it starts)."""
        sim = self.sim
        delays = sim.workload.startup.delays(sim.seed, run.job.job_id, run.attempt + 1, run.workers)
        return max(*(now + delay for delay in delays), now) + run.remaining_s

    def _shadow(self, head: JobRun) -> tuple[float, SimulatedCluster] | None:
        """The head's shadow time and the nodes as they will be then (running jobs that end later still
        hold theirs), or None when it would not fit even once every running job has ended."""
        future = _replica(self.sim.cluster)
        ends = sorted((self._end(run), run.index, run) for run in self.sim.running.values())
        for k, (end, _, run) in enumerate(ends):
            future.release(run.allocation)
            if k + 1 < len(ends) and ends[k + 1][0] == end:
                continue  # every job ending at this instant frees its GPUs before the head is tried
            if future.fits(head.job.gpus):
                return end, future
        return None  # the cluster is never empty while something is queued; kept for a total function

    def _backfill(self, head: JobRun, behind: list[JobRun], now: float) -> None:
        sim = self.sim
        if sim.cluster.free_total == 0 or not behind:
            return
        reservation = self._shadow(head)
        if reservation is None:
            return
        shadow, future = reservation
        present = _replica(sim.cluster)  # where each placement would land now, tried before it is made
        for run in behind:
            if present.free_total == 0:
                return
            allocation = present.place(run.job.gpus)
            if allocation is None:
                continue  # not placeable now (too few GPUs, or none on the nodes it needs)
            if self._end_if_started(run, now) > shadow:
                # Still running at the shadow time: allowed only where the head stays placeable beside it.
                future.take(allocation)  # a node frees up by then, never fills: this always has room
                if not future.fits(head.job.gpus):
                    future.release(allocation)
                    present.release(allocation)
                    continue
            placed = sim.allocate(run, now)
            # The replica holds the same free GPUs per node as the cluster and the cluster's own rule, so
            # the real placement is the one tried; anything else would void the head's guarantee.
            assert placed, run.job.job_id
            assert run.allocation == allocation, (run.job.job_id, allocation, run.allocation)
