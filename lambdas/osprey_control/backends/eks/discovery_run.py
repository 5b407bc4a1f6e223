"""One discovery pass over the configured EKS clusters into the registry (the EKS discovery function's work).

Every observation is written through ``apply_observation``, the same convergent merge as ingested events; the
answer holds counts only (it is a state of the cycle state machine, whose payload must not grow with the fleet:
docs/control-plane.md, Payload). One cluster's failure, or one job's registry write, is reported and logged,
never fatal.

After a cluster's listing succeeded (every kind, every page), its active records that the listing did not name
are reconciled (:mod:`osprey_control.backends.reconcile`: marked missing, closed after the grace period); a
cluster whose listing failed reconciles nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from osprey_control.backends.eks.client import KubernetesApiError, KubernetesClient
from osprey_control.backends.eks.connection import cached_connect
from osprey_control.backends.eks.discovery import discover
from osprey_control.backends.eks.settings import EksDiscoveryEnvironment
from osprey_control.backends.reconcile import DEFAULT_GRACE, ReconcileStore, of_cluster, reconcile
from osprey_control.errors import ERROR_CHARS, FAILURE_SAMPLE
from osprey_control.registry import Backend, JobRecord

__all__ = ["run_discovery"]

logger = logging.getLogger(__name__)

Sink = Callable[[dict[str, Any]], None]


def run_discovery(
    environment: EksDiscoveryEnvironment,
    sink: Sink | None = None,
    *,
    connector: Callable[[str], KubernetesClient] = cached_connect,
    registry: ReconcileStore | None = None,
    on_change: Callable[[Any], object] | None = None,
    grace: timedelta = DEFAULT_GRACE,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> dict[str, Any]:
    """Discover every configured cluster and record each job in ``registry``; ``sink`` receives each
    observation dict as it is found. ``on_change`` gets every record a write changed (the gang watch starter,
    as in the ingest step).

    Returns a summary whose size depends on the number of clusters only: ``jobs`` (discovered), ``recorded``,
    ``unrecorded`` (registry writes that failed, the first few under ``unrecorded_sample``) and per cluster
    its ``jobs``, ``problems`` (jobs not manageable), ``kueue_version``, ``kinds_missing`` and ``reconciled``
    (:class:`~osprey_control.backends.reconcile.ReconcileReport`), or its ``error``.
    """
    jobs = recorded = 0
    clusters: list[dict[str, Any]] = []
    unrecorded: list[dict[str, str]] = []
    # Read once, before this pass writes: every cluster's reconciliation compares its listing with these.
    active: list[JobRecord] = registry.list_active(backend=Backend.EKS) if registry is not None else []
    for cluster in environment.cluster_names:
        try:
            result = discover(
                connector(cluster), cluster, include_pods=environment.include_pods,
                namespaces=environment.namespaces,
            )  # fmt: skip
        except Exception as error:
            # Any failure (DescribeCluster, STS, the API server) is this cluster's; the others still run.
            cached_connect.forget(cluster)
            reason = (
                str(error) if isinstance(error, KubernetesApiError) else f"{type(error).__name__}: {error}"
            )
            logger.exception("eks discovery failed", extra={"cluster": cluster, "error": reason})
            clusters.append({"cluster": cluster, "error": reason[:ERROR_CHARS]})
            continue
        summary = result.to_dict()
        for observation, item in zip(result.observations, summary["observations"], strict=True):
            if registry is not None:
                try:
                    written = registry.apply_observation(observation.to_observation())
                    recorded += 1
                    if on_change is not None and written.changed:
                        on_change(written.record)
                except Exception as error:  # one job's write must not lose the others (retried next pass)
                    failure = {
                        "job": f"eks#{observation.native_id}",
                        "error": f"{type(error).__name__}: {error}",
                    }
                    logger.warning("eks job not recorded", extra={"cluster": cluster, **failure})
                    unrecorded.append(failure)
            if sink is not None:
                sink(item)
            jobs += 1
        for problem in summary["problems"]:
            logger.warning("osprey job not manageable", extra=problem)
        reconciled = None
        if registry is not None:
            mine = of_cluster(active, Backend.EKS, cluster)
            reconciled = reconcile(registry, cluster, mine, result.listed, now=now(), grace=grace).to_dict()
        logger.info(
            "eks cluster discovered",
            extra={"cluster": cluster, "jobs": len(summary["observations"]),
                   "kueue_version": result.kueue_version, "kinds_missing": result.kinds_missing},
        )  # fmt: skip
        clusters.append(
            {
                "cluster": cluster,
                "jobs": len(summary["observations"]),
                "problems": len(summary["problems"]),
                "kueue_version": result.kueue_version,
                "kinds_missing": list(result.kinds_missing),
                "reconciled": reconciled,
            }
        )
    return {
        "jobs": jobs,
        "recorded": recorded,
        "unrecorded": len(unrecorded),
        "unrecorded_sample": [
            {**failure, "error": failure["error"][:ERROR_CHARS]} for failure in unrecorded[:FAILURE_SAMPLE]
        ],
        "clusters": clusters,
    }
