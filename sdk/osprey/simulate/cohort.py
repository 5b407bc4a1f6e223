"""Kueue with one ClusterQueue per team in a cohort (``kueue-cohort``), as Kueue v0.17.0 (``.ci/k8s-versions``)
implements quota, borrowing, lending and classical preemption. The teams and their quotas come from the tenants
file (:mod:`osprey.simulate.tenants`); a job's team is its ``share``.

What is modelled, with the v0.17.0 source it follows:

- **Quota** (``pkg/cache/scheduler`` resource nodes, ``available``): a team's guaranteed part is ``nominal -
  lendingLimit`` (0 without a lending limit); the cohort holds what each team lends (``lendingLimit``, else all
  of its nominal quota) and counts each team's usage beyond its guaranteed part. What a team can still take is
  its unused guaranteed part plus what the cohort has left, the latter capped by the team's ``borrowingLimit``.
  GPUs outside every quota are not reachable, as in a real cohort.
- **Order** (``pkg/scheduler`` ``entryOrdering``, ``BestEffortFIFO``): each pass takes the head of every team's
  queue (priority, then queue time in whole seconds, as :class:`~osprey.simulate.kueue.Kueue`), tries the heads
  that fit within their team's nominal quota before the ones that must borrow, then by priority, then queue time;
  a head that cannot be admitted is set aside for the pass and the team's next workload becomes its head.
- **Preemption** (``pkg/scheduler/preemption``, classical: ``classicalPreemptions``, ``CandidatesOrdering``,
  ``hierarchical_preemption.go``): ``withinClusterQueue`` (lower-priority workloads of the same team) and
  ``reclaimWithinCohort`` (workloads of teams above their nominal quota: ``Any`` priority, ``LowerPriority`` or
  ``Never``) and ``borrowWithinCohort`` (``Never``, or ``LowerPriority``: reclaim even while borrowing).
  Candidates from other teams come first, lower priority first, then the most recently admitted; a candidate
  whose team has fallen back within its quota is skipped; once the workload fits, victims are put back, last
  removed first, while it still fits. Reclaim without borrowing is only for a team within its quota, and a
  workload larger than its team's quota preempts nothing unless ``borrowWithinCohort`` allows it (the flavor
  assigner's ``NoFit``, ``flavorassigner.go``). Preemption is for quota only: a workload whose quota is free but
  whose GPUs are not all on free nodes waits (Kueue would admit it and leave its pods pending).

Left out, and said so in docs/multi-tenant.md: Kueue's fair sharing (``fairSharing``, DRS ordering and its
preemption strategies), hierarchical cohorts, the rule that a pass skips a second admission that needs
preemption in a cohort already changed in that pass, and ``borrowAfterPreemptions`` in the head order (a head
that would stop borrowing once it preempted is sorted as borrowing here). A preemptor is admitted in the pass its
victims leave (the real Kueue admits it a cycle later, once they are gone). As in :class:`~osprey.simulate.kueue.Kueue`, an admitted
workload binds at once and victims free their GPUs at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from osprey.simulate.kueue import Kueue
from osprey.simulate.layered import KueueOsprey
from osprey.simulate.model import SimulationError, Workload
from osprey.simulate.sim import JobRun, Simulator, Status
from osprey.simulate.tenants import Tenant, Tenants, ceiling_gpus, guaranteed_gpus

__all__ = ["CohortOracle", "KueueCohort", "KueueCohortOsprey", "check_cohort"]


@dataclass(frozen=True, slots=True)
class _Victim:
    run: JobRun
    # Reclaim from a team that may not be taken from while the preemptor borrows (ReclaimWithoutBorrowing).
    only_without_borrowing: bool


def check_cohort(tenants: Tenants, workload: Workload, scheduler: str = "kueue-cohort") -> None:
    """Raise :class:`SimulationError` for a job larger than its team can ever hold in a cohort of ``tenants``:
    Kueue would leave it pending for good, so the tenants file and the workload disagree."""
    for job in workload.jobs:
        ceiling = ceiling_gpus(tenants, job.share)
        if job.gpus > ceiling:
            raise SimulationError(
                f"{scheduler}: job {job.job_id} asks for {job.gpus} GPUs, more than team {job.share!r} can ever "
                f"hold in the cohort ({ceiling}: its quota, what the others lend and its borrowingLimitGpus); "
                "raise the team's quota or limits in the tenants file"
            )


class KueueCohort(Kueue):
    name: ClassVar[str] = "kueue-cohort"
    # Whether a team's workload may preempt the team's own lower-priority ones (withinClusterQueue).
    preempts_within_team: ClassVar[bool] = True

    def bind(self, sim: Simulator) -> None:
        super().bind(sim)
        tenants = sim.workload.tenants
        if tenants is None:
            raise SimulationError(
                f"{self.name} needs the teams' quotas: give a tenants file (--tenants FILE.yaml, "
                "docs/multi-tenant.md)"
            )
        self.teams: Mapping[str, Tenant] = tenants.by_name
        self.usage: dict[str, int] = dict.fromkeys(self.teams, 0)
        check_cohort(tenants, sim.workload, self.name)

    # -- quota ---------------------------------------------------------------------------------------------
    def _cohort_left(self) -> int:
        lent = sum(team.nominal_gpus - guaranteed_gpus(team) for team in self.teams.values())
        used = sum(max(0, self.usage[name] - guaranteed_gpus(team)) for name, team in self.teams.items())
        return lent - used

    def _available(self, name: str) -> int:
        """What team ``name`` can still be admitted with (Kueue's ``available``)."""
        team = self.teams[name]
        guaranteed = guaranteed_gpus(team)
        local = max(0, guaranteed - self.usage[name])
        from_cohort = self._cohort_left()
        if team.borrowing_limit_gpus is not None:
            stored = team.nominal_gpus - guaranteed
            used_in_cohort = max(0, self.usage[name] - guaranteed)
            from_cohort = min(from_cohort, stored - used_in_cohort + team.borrowing_limit_gpus)
        return local + from_cohort

    def _quota_fits(self, run: JobRun, *, borrowing: bool) -> bool:
        if not borrowing and self._borrows(run):
            return False
        return run.job.gpus <= self._available(run.job.share)

    def _fits(self, run: JobRun, *, borrowing: bool) -> bool:
        return self._quota_fits(run, borrowing=borrowing) and self.sim.cluster.fits(run.job.gpus)

    def _borrows(self, run: JobRun) -> bool:
        return self.usage[run.job.share] + run.job.gpus > self.teams[run.job.share].nominal_gpus

    # -- usage follows admission -------------------------------------------------------------------------------
    def on_allocated(self, run: JobRun, now: float) -> None:
        super().on_allocated(run, now)
        self.usage[run.job.share] += run.job.gpus

    def on_finished(self, run: JobRun, now: float) -> None:
        super().on_finished(run, now)
        self.usage[run.job.share] -= run.job.gpus

    # -- one scheduling pass ------------------------------------------------------------------------------------
    def schedule(self, now: float) -> None:
        queues: dict[str, list[JobRun]] = {name: [] for name in self.teams}
        for run in sorted(self.sim.queue.values(), key=self._order):
            queues[run.job.share].append(run)
        positions = dict.fromkeys(queues, 0)
        while True:
            heads = [queue[positions[name]] for name, queue in queues.items() if positions[name] < len(queue)]
            if not heads:
                return
            heads.sort(key=lambda run: (self._borrows(run), *self._order(run)))
            for run in heads:
                positions[run.job.share] += 1
                if run.status is not Status.QUEUED:
                    continue
                if self._fits(run, borrowing=True):
                    self.sim.allocate(run, now)
                elif self.preemption and not self._quota_fits(run, borrowing=True):
                    # Kueue preempts for quota only: a workload whose quota is free but whose nodes are not
                    # would be admitted and wait for them (pods pending); here it waits unadmitted.
                    self._preempt_for(run, now)

    def _preempt_for(self, run: JobRun, now: float) -> None:
        name = run.job.share
        config = self.teams[name]
        if run.job.gpus > config.nominal_gpus and config.borrow_within_cohort == "Never":
            return  # larger than its quota, it could only fit by borrowing: Kueue's flavor assigner says NoFit
        wanted = self.priority(run)
        within_quota = not self._borrows(run)  # a hierarchical advantage
        reclaim: list[_Victim] = []
        if config.reclaim_within_cohort != "Never":
            for other in self.sim.running.values():
                if other.job.share == name or not self._over_quota(other.job.share):
                    continue
                if config.reclaim_within_cohort == "LowerPriority" and self.priority(other) >= wanted:
                    continue
                without_borrowing = not within_quota and (
                    config.borrow_within_cohort == "Never" or self.priority(other) >= wanted
                )
                reclaim.append(_Victim(other, without_borrowing))
        same: list[_Victim] = []
        if self.preempts_within_team and config.within_cluster_queue != "Never":
            same = [
                _Victim(other, False)
                for other in self.sim.running.values()
                if other.job.share == name and self.priority(other) < wanted
            ]
        # Reclaim candidates (hierarchy candidates when the team is within its quota, priority candidates
        # otherwise: one group either way in a flat cohort) before the team's own, each in CandidatesOrdering.
        candidates = [*sorted(reclaim, key=self._victim_order), *sorted(same, key=self._victim_order)]
        if not candidates:
            return
        forbidden = config.borrow_within_cohort == "Never"
        if not reclaim or (forbidden and not self.usage[name] < config.nominal_gpus):
            attempts: tuple[bool, ...] = (True,)
        elif forbidden and not within_quota:
            attempts = (False, True)
        else:
            attempts = (True, False)
        for borrowing in attempts:
            victims = self._minimal(run, candidates, borrowing=borrowing)
            if victims is not None:
                for victim in victims:
                    victim.queue_key_s = self._created(victim)
                    self.sim.evict(victim, now, preempted=True)
                self.sim.allocate(run, now)
                return

    def _victim_order(self, victim: _Victim) -> tuple[int, float, int]:
        # CandidatesOrdering after the queue split: lower priority, then the most recently admitted.
        run = victim.run
        return (self.priority(run), -(run.allocated_s or 0.0), -run.index)

    def _over_quota(self, name: str) -> bool:
        return self.usage[name] > self.teams[name].nominal_gpus

    def _minimal(self, run: JobRun, candidates: Iterable[_Victim], *, borrowing: bool) -> list[JobRun] | None:
        """Remove candidates in order until ``run`` fits, then put back (last removed first) those not needed;
        the cluster and the usage are left as they were. None when even every valid candidate is not enough."""
        removed: list[JobRun] = []
        fits = False
        for victim in candidates:
            other = victim.run
            if other.job.share != run.job.share:
                if borrowing and victim.only_without_borrowing:
                    continue
                if not self._over_quota(other.job.share):
                    continue  # its team is back within its quota: no longer a reclaim target
            self._take_out(other)
            removed.append(other)
            if self._fits(run, borrowing=borrowing):
                fits = True
                break
        if fits:
            for other in reversed(removed[:-1]):
                self._put_back(other)
                if self._fits(run, borrowing=borrowing):
                    removed.remove(other)
                else:
                    self._take_out(other)
        for other in removed:
            self._put_back(other)
        return removed if fits else None

    def _take_out(self, run: JobRun) -> None:
        self.sim.cluster.release(run.allocation)
        self.usage[run.job.share] -= run.job.gpus

    def _put_back(self, run: JobRun) -> None:
        self.sim.cluster.take(run.allocation)
        self.usage[run.job.share] += run.job.gpus


class KueueCohortOsprey(KueueOsprey, KueueCohort):
    """``kueue-cohort`` with Osprey writing each Workload's ``spec.priority`` as production's EKS applier does
    (:class:`~osprey.simulate.layered.KueueOsprey`): the priorities order each team's queue, the heads across
    teams and preemption inside a team, and which borrowing workload a reclaim takes first; quota, borrowing and
    whether a reclaim happens at all stay Kueue's. The guard judges the pool with its single-queue Kueue model
    over the whole cluster, which is what production's guard does today (it knows no cohort)."""

    name: ClassVar[str] = "kueue-cohort+osprey"


class CohortOracle(KueueCohort):
    """The wait goal's reference on a shared cluster: the cohort's quotas, borrowing and reclaim exactly as
    ``kueue-cohort``, with perfect knowledge ordering every queue and the heads across teams by least remaining
    GPU-time (:class:`~osprey.simulate.baselines.Oracle`'s order). Like that oracle it does not preempt by order
    (that would throw work away); it reclaims a lent quota, which a guarantee needs."""

    name: ClassVar[str] = "oracle-cohort"
    preempts_within_team: ClassVar[bool] = False

    def _order(self, run: JobRun) -> tuple[int, float, str, int]:
        return (math.ceil(run.job.gpus * run.remaining_s), run.job.submit_s, "", run.index)

    def on_allocated(self, run: JobRun, now: float) -> None:
        # No waitForPodsReady timer: a reference does not evict a job for starting slowly.
        self.admitted_gpus += run.job.gpus
        self.usage[run.job.share] += run.job.gpus
