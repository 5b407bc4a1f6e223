"""Teams sharing one cluster, each with a quota: what ``osprey simulate --tenants FILE.yaml`` reads
(docs/multi-tenant.md).

A tenants file names every team a workload's ``share`` column uses::

    teams:
      - name: team-a
        nominalGpus: 64          # the team's guaranteed GPUs (Kueue nominalQuota)
        borrowingLimitGpus: 32   # most it may use beyond its quota (absent: no limit)
        lendingLimitGpus: 16     # most of its unused quota others may use (absent: all of it)
        fairShareWeight: 2       # its weight when idle GPUs are shared out (default 1)
        priorityClasses: [high, default]   # optional: the classes the team submits with
        # kueue-cohort only, the team's ClusterQueue preemption (defaults below):
        withinClusterQueue: LowerPriority   # Never | LowerPriority
        reclaimWithinCohort: Any            # Never | LowerPriority | Any
        borrowWithinCohort: Never           # Never | LowerPriority

The same numbers mean the same thing to every scheduler that has a team mechanism: the Batch fair-share
schedulers (``fairshare``, ``sagemaker-queue`` and their ``+osprey``) give each team the ``weightFactor``
``1 / fairShareWeight`` (Batch: a lower weight factor gets more), and ``fairness`` measures every scheduler
against the quotas (:func:`entitlement`). Pure data and arithmetic: no AWS, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from osprey.simulate.model import SimulationError, Workload

__all__ = [
    "Tenant",
    "Tenants",
    "TenantsError",
    "ceiling_gpus",
    "entitlement",
    "guaranteed_gpus",
    "load_tenants",
    "parse_tenants",
]

_FIELDS = (
    "name",
    "nominalGpus",
    "borrowingLimitGpus",
    "lendingLimitGpus",
    "fairShareWeight",
    "priorityClasses",
    "withinClusterQueue",
    "reclaimWithinCohort",
    "borrowWithinCohort",
)
# Each ClusterQueue preemption field, its allowed values, and the default here. Kueue's API defaults all three
# to Never; a quota a team cannot reclaim is no guarantee, so a shared cluster sets reclaim (as HyperPod task
# governance does for a team's lent quota) and preemption by priority inside a team.
_PREEMPTION = {
    "withinClusterQueue": (("Never", "LowerPriority"), "LowerPriority"),
    "reclaimWithinCohort": (("Never", "LowerPriority", "Any"), "Any"),
    "borrowWithinCohort": (("Never", "LowerPriority"), "Never"),
}


class TenantsError(SimulationError):
    """A tenants file the simulator cannot use; the message names the field and what is allowed."""


@dataclass(frozen=True, slots=True)
class Tenant:
    """One team: its guaranteed GPUs, how far it may borrow and lend, and its weight for idle GPUs."""

    name: str
    nominal_gpus: int
    borrowing_limit_gpus: int | None = None  # None: no limit beyond what is free
    lending_limit_gpus: int | None = None  # None: all of its unused quota may be lent
    fair_share_weight: float = 1.0
    priority_classes: tuple[str, ...] = ()
    within_cluster_queue: str = "LowerPriority"
    reclaim_within_cohort: str = "Any"
    borrow_within_cohort: str = "Never"

    @property
    def quota_and_borrowing_gpus(self) -> float:
        """The most its limits let the team hold at once: its quota plus what it may borrow (see also
        :func:`ceiling_gpus`, which also counts what the other teams lend)."""
        if self.borrowing_limit_gpus is None:
            return math.inf
        return float(self.nominal_gpus + self.borrowing_limit_gpus)

    @property
    def batch_weight_factor(self) -> float:
        """The team's Batch ``weightFactor``: the inverse of its weight (a lower factor gets more)."""
        return 1.0 / self.fair_share_weight


@dataclass(frozen=True, slots=True)
class Tenants:
    """Every team of a shared cluster, by name."""

    teams: tuple[Tenant, ...]
    # Built once: the simulator looks teams up at every arrival and every change of demand.
    _by_name: Mapping[str, Tenant] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.teams:
            raise TenantsError("teams: give at least one team")
        # A plain dict (read-only by its type): a mappingproxy would not pickle to the benches' worker processes.
        object.__setattr__(self, "_by_name", {team.name: team for team in self.teams})

    @property
    def by_name(self) -> Mapping[str, Tenant]:
        return self._by_name

    @property
    def nominal_gpus(self) -> int:
        return sum(team.nominal_gpus for team in self.teams)

    def weight_factors(self) -> dict[str, float]:
        """Each team's Batch ``weightFactor`` (:attr:`Tenant.batch_weight_factor`)."""
        return {team.name: team.batch_weight_factor for team in self.teams}

    def check(self, workload: Workload) -> None:
        """Raise :class:`TenantsError` unless the quotas fit the cluster and every job's team is a tenant."""
        if self.nominal_gpus > workload.total_gpus:
            raise TenantsError(
                f"teams[].nominalGpus: the quotas add up to {self.nominal_gpus} GPUs, more than the cluster's "
                f"{workload.total_gpus}; lower them or give a larger cluster (--gpus)"
            )
        names = self.by_name
        for job in workload.jobs:
            if job.share not in names:
                raise TenantsError(
                    f"job {job.job_id}: its team (share) {job.share!r} is not in the tenants file "
                    f"(teams: {', '.join(sorted(names))}); add it, or name one of them in the workload's "
                    "share column"
                )


def _whole(entry: Mapping[str, Any], key: str, where: str, *, required: bool) -> int | None:
    value = entry.get(key)
    if value is None:
        if required:
            raise TenantsError(f"{where}.{key}: required, a whole number of GPUs >= 0")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TenantsError(f"{where}.{key}: must be a whole number of GPUs >= 0, got {value!r}")
    return value


def _tenant(entry: object, where: str) -> Tenant:
    if not isinstance(entry, Mapping):
        raise TenantsError(f"{where}: must be a mapping with name and nominalGpus, got {entry!r}")
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise TenantsError(f"{where}.{unknown[0]}: unknown field; allowed: {', '.join(_FIELDS)}")
    name = entry.get("name")
    if name is None:
        raise TenantsError(f"{where}.name: required, the team's share identifier (a non-empty string)")
    if not isinstance(name, str) or not name.strip():
        raise TenantsError(f"{where}.name: must be a non-empty string (quote it in YAML), got {name!r}")
    weight = entry.get("fairShareWeight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight < math.inf:
        raise TenantsError(f"{where}.fairShareWeight: must be a number > 0, got {weight!r}")
    classes = entry.get("priorityClasses", [])
    if not isinstance(classes, list) or not all(isinstance(c, str) and c for c in classes):
        raise TenantsError(f"{where}.priorityClasses: must be a list of class names, got {classes!r}")
    nominal = _whole(entry, "nominalGpus", where, required=True)
    assert nominal is not None
    lending = _whole(entry, "lendingLimitGpus", where, required=False)
    if lending is not None and lending > nominal:
        raise TenantsError(
            f"{where}.lendingLimitGpus: {lending} is more than the team's nominalGpus ({nominal}); a team lends at "
            "most its own quota (Kueue refuses a larger lendingLimit)"
        )
    preemption: dict[str, str] = {}
    for key, (allowed, default) in _PREEMPTION.items():
        value = entry.get(key, default)
        if value not in allowed:
            raise TenantsError(f"{where}.{key}: must be one of {', '.join(allowed)}, got {value!r}")
        preemption[key] = value
    return Tenant(
        name=name,
        nominal_gpus=nominal,
        borrowing_limit_gpus=_whole(entry, "borrowingLimitGpus", where, required=False),
        lending_limit_gpus=lending,
        fair_share_weight=float(weight),
        priority_classes=tuple(classes),
        within_cluster_queue=preemption["withinClusterQueue"],
        reclaim_within_cohort=preemption["reclaimWithinCohort"],
        borrow_within_cohort=preemption["borrowWithinCohort"],
    )


def parse_tenants(document: object) -> Tenants:
    """The :class:`Tenants` a parsed tenants document describes (module docstring)."""
    if not isinstance(document, Mapping) or set(document) != {"teams"}:
        raise TenantsError("the file must be a mapping with one key, teams: a list of teams")
    entries = document["teams"]
    if not isinstance(entries, list) or not entries:
        raise TenantsError("teams: must be a non-empty list of teams")
    teams = tuple(_tenant(entry, f"teams[{index}]") for index, entry in enumerate(entries))
    seen: set[str] = set()
    for index, team in enumerate(teams):
        if team.name in seen:
            raise TenantsError(f"teams[{index}].name: {team.name!r} is given twice; each team once")
        seen.add(team.name)
    return Tenants(teams)


def load_tenants(path: Path) -> Tenants:
    """Read and check a tenants file; :class:`TenantsError` names what is wrong."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise TenantsError(f"cannot read {path}: {error.strerror or error}") from error
    except UnicodeDecodeError as error:
        raise TenantsError(f"{path} is not UTF-8 text: {error.reason} at byte {error.start}") from error
    except yaml.YAMLError as error:
        raise TenantsError(f"{path} is not YAML: {error}") from error
    return parse_tenants(document)


def guaranteed_gpus(team: Tenant) -> int:
    """The part of a team's quota it never lends (Kueue: ``nominalQuota - lendingLimit``, 0 without a limit)."""
    return 0 if team.lending_limit_gpus is None else max(0, team.nominal_gpus - team.lending_limit_gpus)


def ceiling_gpus(tenants: Tenants, name: str) -> int:
    """The most team ``name`` can ever hold in a Kueue cohort of these teams (everyone else idle): its guaranteed
    part plus what the cohort holds, capped by its lent part plus its borrowing limit."""
    team = tenants.by_name[name]
    guaranteed = guaranteed_gpus(team)
    cohort = sum(other.nominal_gpus - guaranteed_gpus(other) for other in tenants.teams)
    if team.borrowing_limit_gpus is not None:
        cohort = min(cohort, team.nominal_gpus - guaranteed + team.borrowing_limit_gpus)
    return guaranteed + cohort


def entitlement(capacity: float, tenants: Tenants, demands: Mapping[str, float]) -> dict[str, float]:
    """What each team with work is entitled to right now, in GPUs (docs/multi-tenant.md, Fairness).

    A team gets its quota up to its demand. What is left (the cluster beyond every quota, and each team's
    unused quota up to its ``lendingLimitGpus``) is shared out among the teams that want more in proportion to
    ``fairShareWeight`` (weighted water-filling), none beyond its demand or its quota plus
    ``borrowingLimitGpus``.
    """
    teams = tenants.by_name
    given: dict[str, float] = {}
    lendable = max(0.0, capacity - tenants.nominal_gpus)
    for name, team in teams.items():
        demand = float(demands.get(name, 0.0))
        base = min(demand, float(team.nominal_gpus))
        if demand > 0:
            given[name] = base
        unused = team.nominal_gpus - base
        lendable += unused if team.lending_limit_gpus is None else min(unused, team.lending_limit_gpus)
    caps = {name: min(float(demands[name]), teams[name].quota_and_borrowing_gpus) for name in given}
    wanting = {name: caps[name] - given[name] for name in given if caps[name] > given[name]}
    _weighted_fill(lendable, wanting, {name: teams[name].fair_share_weight for name in wanting}, given)
    return given


def _weighted_fill(
    capacity: float, wants: Mapping[str, float], weights: Mapping[str, float], into: dict[str, float]
) -> None:
    """Share ``capacity`` among ``wants`` in proportion to ``weights``, each capped at its want, into ``into``.

    Teams are capped in the order their want runs out (want over weight, smallest first); each cap leaves the
    rest to be split again among the others, as :func:`~osprey.simulate.fairness.water_fill` does with equal
    weights."""
    pending: Sequence[str] = sorted(wants, key=lambda name: (wants[name] / weights[name], name))
    left = capacity
    total_weight = math.fsum(weights[name] for name in pending)
    for name in pending:
        if left <= 0 or total_weight <= 0:
            break
        share = left * weights[name] / total_weight
        got = min(wants[name], share)
        into[name] += got
        left -= got
        total_weight -= weights[name]
