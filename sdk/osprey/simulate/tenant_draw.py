"""Quotas drawn for a workload's teams, so shared-cluster goals are checked on configurations no one chose
(``osprey simulate --tenants drawn``, ``bench/tenant_bench.py --family-seeds``; docs/multi-tenant.md).

From its own random stream (the seed and the workload's name), so the jobs never depend on it:

- **Quotas**: the cluster split among the workload's teams by weights drawn uniformly on the simplex (Dirichlet
  with all parameters 1), in whole nodes when there are at least as many nodes as teams, by largest remainder,
  adding up to the cluster exactly: some teams get much more than they submit, some much less, some nothing.
- **Limits**: each team lends at most a uniform fraction of its quota with probability 1/4, and borrows at most a
  uniform fraction of the rest of the cluster with probability 1/4; a borrowing limit too small for the team's
  largest job is raised to fit it, and lending limits that would keep a job from ever fitting are dropped (Kueue
  would leave such a job pending for good, which no platform team configures on purpose).
- **Weights and preemption**: ``fairShareWeight`` uniform 0.5..4 with probability 0.3 (else 1);
  ``reclaimWithinCohort`` ``Any`` / ``LowerPriority`` / ``Never`` with probabilities 0.7 / 0.2 / 0.1.

Nothing here is tuned on a result: the ranges are wide on purpose, and the bench's draws are fixed seeds.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

from osprey.simulate.model import Workload
from osprey.simulate.tenants import Tenant, Tenants, ceiling_gpus

__all__ = ["draw_tenants"]

_RECLAIM = (("Any", 0.7), ("LowerPriority", 0.2), ("Never", 0.1))


def _split(total: int, weights: list[float]) -> list[int]:
    """``total`` split in proportion to ``weights`` by largest remainder (ties to the earlier team)."""
    raw = [total * weight / math.fsum(weights) for weight in weights]
    shares = [math.floor(value) for value in raw]
    order = sorted(range(len(raw)), key=lambda index: (-(raw[index] - shares[index]), index))
    for index in order[: total - sum(shares)]:
        shares[index] += 1
    return shares


def draw_tenants(workload: Workload, seed: int) -> Tenants:
    """The teams of ``workload`` (its jobs' shares) with quotas, limits, weights and preemption drawn for it."""
    rng = random.Random(f"tenants:{workload.name}:{seed}")
    names = sorted({job.share for job in workload.jobs}) or ["default"]
    node = max(workload.node_gpus)
    total = workload.total_gpus
    unit = node if total // node >= len(names) else 1
    weights = [rng.expovariate(1.0) for _ in names]  # normalized exponentials: uniform on the simplex
    quotas = [share * unit for share in _split(total // unit, weights)]
    quotas[0] += total - sum(quotas)  # GPUs beyond whole nodes (a cluster of odd nodes) to the first team
    largest = dict.fromkeys(names, 0)
    for job in workload.jobs:
        largest[job.share] = max(largest[job.share], job.gpus)
    teams = []
    for name, nominal in zip(names, quotas, strict=True):
        lending = round(nominal * rng.random()) if rng.random() < 0.25 else None
        borrowing = round((total - nominal) * rng.random()) if rng.random() < 0.25 else None
        if borrowing is not None:
            borrowing = max(borrowing, largest[name] - nominal)
        weight = round(rng.uniform(0.5, 4.0), 1) if rng.random() < 0.3 else 1.0
        reclaim = rng.choices([value for value, _ in _RECLAIM], [p for _, p in _RECLAIM])[0]
        teams.append(Tenant(name, nominal, borrowing, lending, weight, reclaim_within_cohort=reclaim))
    drawn = Tenants(tuple(teams))
    if any(ceiling_gpus(drawn, name) < largest[name] for name in names):
        drawn = Tenants(tuple(replace(team, lending_limit_gpus=None) for team in teams))
    return drawn
