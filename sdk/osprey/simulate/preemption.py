"""Choosing preemption victims, shared by the Kueue baseline and Osprey (same rule, different priorities)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from osprey.simulate.cluster import SimulatedCluster
from osprey.simulate.sim import JobRun

__all__: list[str] = []


def select_victims(
    cluster: SimulatedCluster,
    gpus: int,
    candidates: Sequence[JobRun],
    importance: Callable[[JobRun], float],
    quota_ok: Callable[[int], bool] = lambda freed: True,
) -> list[JobRun] | None:
    """The running jobs to evict so that ``gpus`` fit, or None when even all ``candidates`` do not suffice.

    ``candidates`` are tried in the order given (least important first) until the job fits; then, most
    important first, every victim that turns out not to be needed is kept running (Kueue's approach). The
    cluster is left exactly as it was. ``quota_ok(freed_gpus)`` adds a quota check on top of the fit.
    """
    victims: list[JobRun] = []
    freed = 0
    for victim in candidates:
        cluster.release(victim.allocation)
        victims.append(victim)
        freed += victim.job.gpus
        if quota_ok(freed) and cluster.fits(gpus):
            break
    else:
        for victim in victims:
            cluster.take(victim.allocation)
        return None
    for victim in sorted(victims, key=lambda r: (-importance(r), r.allocated_s or 0.0, r.index)):
        cluster.take(victim.allocation)
        if quota_ok(freed - victim.job.gpus) and cluster.fits(gpus):
            victims.remove(victim)
            freed -= victim.job.gpus
        else:
            cluster.release(victim.allocation)
    for victim in victims:
        cluster.take(victim.allocation)
    return victims
