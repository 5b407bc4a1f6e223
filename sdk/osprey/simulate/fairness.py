"""Team fairness: GPU-time each team received against the GPU-time it was entitled to (docs/scheduling.md).

A job's **team** is the share identifier it was submitted with (``Job.share``: the LLM workload's teams, the
trace's ``qos``, a CSV's ``share`` column, ``default`` when none), for every scheduler. ``fairshare+osprey``
gives each job a Batch share of its own; that is how the Batch applier carries Osprey's order, not a team,
so it is never the unit here.

**Entitlement.** At every instant the cluster's GPUs are divided among the teams that have work (queued,
backing off or running) by max-min fair water-filling with equal weights, each team capped at its demand
(the GPUs its queued and running jobs ask for): a team asking for less than an equal split gets what it
asks for and the rest is split again among the others. Equal weights because, without a tenants file, no
modelled scheduler promises teams anything else (Batch's default ``weightFactor`` is 1.0 for every share;
Kueue and Slurm have no team quota in these models). With a tenants file (``--tenants``) the entitlement is
what was configured instead: each team's quota while it has work, plus a ``fairShareWeight``-proportional part
of what the others leave idle (:func:`osprey.simulate.tenants.entitlement`).

**Reclaim wait** (tenants only). A job that, when submitted, fits in its team's unused quota (its GPUs at most
the team's ``nominalGpus`` minus what the team holds) is owed its GPUs at once: the time from its submission
to its first admission is its reclaim wait, and ``p95_reclaim_s`` is the 95th percentile per team.

**Counted periods.** A team's entitled and received (allocated) GPU-time accrue only while it has queued
work (a job queued or backing off after an eviction): a team whose every job started at once was never
held back, whatever it received. Both integrate over the whole run (first submission to last end), not only
the measurement window, so a team starved while the backlog drains still counts.

**fairness** = Jain's index (Jain, Chiu and Hawe, 1984) over the counted teams of
x = received / entitled: ``(sum x)^2 / (n * sum x^2)``, 1.0 when every team got the same fraction of its
entitlement, 1/n when one team got everything. With fewer than two teams counted it is 1.0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from osprey.simulate.tenants import Tenants, entitlement

__all__ = ["TeamAccount", "jain", "water_fill"]


def water_fill(capacity: float, demands: Mapping[str, float]) -> dict[str, float]:
    """Max-min fair split of ``capacity`` among ``demands`` with equal weights, each capped at its demand."""
    shares: dict[str, float] = {}
    left = capacity
    pending = sorted(demands.items(), key=lambda item: (item[1], item[0]))
    for position, (team, demand) in enumerate(pending):
        level = left / (len(pending) - position)
        given = min(float(demand), level)
        shares[team] = given
        left -= given
    return shares


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index of non-negative values: 1.0 for equal values (and for fewer than two, or all 0)."""
    if len(values) < 2:
        return 1.0
    squares = math.fsum(value * value for value in values)
    if squares <= 0:
        return 1.0
    return math.fsum(values) ** 2 / (len(values) * squares)


@dataclass
class TeamAccount:
    """Per-team state kept up to date by the simulator, and its integrals (GPU-seconds).

    The simulator reports: a job arrived or ended (:meth:`demand`), entered or left the queue
    (:meth:`queued`), took or released GPUs (:meth:`allocated`); :meth:`advance` integrates the state held
    between two instants, exactly, as the :class:`~osprey.simulate.ledger.Ledger` does.
    """

    total_gpus: int
    tenants: Tenants | None = None
    queued_jobs: dict[str, int] = field(default_factory=dict)
    demand_gpus: dict[str, int] = field(default_factory=dict)
    allocated_gpus: dict[str, int] = field(default_factory=dict)
    # While the team had queued work, over the whole run.
    entitled_gpu_s: dict[str, float] = field(default_factory=dict)
    received_gpu_s: dict[str, float] = field(default_factory=dict)
    # Allocated GPU-time in the measurement window, whether queued or not.
    window_allocated_gpu_s: dict[str, float] = field(default_factory=dict)
    # Tenants only: each owed job's submission time until it is admitted, and the reclaim waits per team.
    owed_since: dict[int, tuple[str, float]] = field(default_factory=dict)
    reclaim_waits_s: dict[str, list[float]] = field(default_factory=dict)
    _entitlement: dict[str, float] | None = field(default=None, repr=False)

    def demand(self, team: str, gpus: int) -> None:
        """A job of ``team`` asking for ``gpus`` arrived (positive) or ended (negative)."""
        left = self.demand_gpus.get(team, 0) + gpus
        if left:
            self.demand_gpus[team] = left
        else:
            self.demand_gpus.pop(team, None)
        self._entitlement = None  # only the demands move the water level

    def submitted(self, key: int, team: str, gpus: int, now: float) -> None:
        """A job (``key``) of ``team`` asking for ``gpus`` was submitted at ``now``: with tenants, start its
        reclaim clock when it fits in the team's unused quota."""
        if self.tenants is None:
            return
        self.reclaim_waits_s.setdefault(team, [])
        tenant = self.tenants.by_name.get(team)
        if tenant is not None and gpus <= tenant.nominal_gpus - self.allocated_gpus.get(team, 0):
            self.owed_since[key] = (team, now)

    def admitted(self, key: int, now: float) -> None:
        """The job ``key`` got every GPU it asked for at ``now`` (only its first admission stops the clock)."""
        owed = self.owed_since.pop(key, None)
        if owed is not None:
            team, since = owed
            self.reclaim_waits_s.setdefault(team, []).append(now - since)

    def queued(self, team: str, jobs: int) -> None:
        """A job of ``team`` entered (1) or left (-1) the queue (backing off counts as queued)."""
        left = self.queued_jobs.get(team, 0) + jobs
        if left:
            self.queued_jobs[team] = left
        else:
            del self.queued_jobs[team]

    def allocated(self, team: str, gpus: int) -> None:
        """``team`` took (positive) or released (negative) GPUs."""
        self.allocated_gpus[team] = self.allocated_gpus.get(team, 0) + gpus

    def entitlement(self) -> dict[str, float]:
        """The current water-filled split of the cluster among the teams with work."""
        if self._entitlement is None:
            if self.tenants is None:
                self._entitlement = water_fill(float(self.total_gpus), self.demand_gpus)
            else:
                self._entitlement = entitlement(float(self.total_gpus), self.tenants, self.demand_gpus)
        return self._entitlement

    def advance(self, seconds: float, window_seconds: float) -> None:
        """Account for the current state held ``seconds``, of which ``window_seconds`` in the window."""
        if self.queued_jobs:
            split = self.entitlement()
            for team in self.queued_jobs:
                self.entitled_gpu_s[team] = (
                    self.entitled_gpu_s.get(team, 0.0) + split.get(team, 0.0) * seconds
                )
                held = self.allocated_gpus.get(team, 0) * seconds
                self.received_gpu_s[team] = self.received_gpu_s.get(team, 0.0) + held
        if window_seconds > 0:
            for team, gpus in self.allocated_gpus.items():
                if gpus:
                    inside = gpus * window_seconds
                    self.window_allocated_gpu_s[team] = self.window_allocated_gpu_s.get(team, 0.0) + inside

    def service_ratio(self, team: str) -> float | None:
        """Received over entitled GPU-time while queued; None for a team that never had queued work."""
        entitled = self.entitled_gpu_s.get(team, 0.0)
        return self.received_gpu_s.get(team, 0.0) / entitled if entitled > 0 else None

    @property
    def fairness(self) -> float:
        """Jain's index over the teams that had queued work of received / entitled GPU-time."""
        ratios = [self.service_ratio(team) for team in sorted(self.entitled_gpu_s)]
        return jain([ratio for ratio in ratios if ratio is not None])
