"""One discovery pass over the configured EKS clusters into the registry (the EKS discovery function's work).

Every observation is written through ``apply_observation``, the same convergent merge as ingested events; the
answer holds counts only (it is a state of the cycle state machine, whose payload must not grow with the fleet:
docs/control-plane.md, Payload). One cluster's failure, or one job's registry write, is reported and logged,
never fatal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from osprey_control.backends.eks.client import KubernetesApiError, KubernetesClient
from osprey_control.backends.eks.connection import cached_connect
from osprey_control.backends.eks.discovery import discover
from osprey_control.backends.eks.settings import EksDiscoveryEnvironment
from osprey_control.errors import ERROR_CHARS, FAILURE_SAMPLE
from osprey_control.registry import ObservationStore

__all__ = ["run_discovery"]

logger = logging.getLogger(__name__)

Sink = Callable[[dict[str, Any]], None]


def run_discovery(
    environment: EksDiscoveryEnvironment,
    sink: Sink | None = None,
    *,
    connector: Callable[[str], KubernetesClient] = cached_connect,
    registry: ObservationStore | None = None,
    on_change: Callable[[Any], object] | None = None,
) -> dict[str, Any]:
    """Discover every configured cluster and record each job in ``registry``; ``sink`` receives each
    observation dict as it is found. ``on_change`` gets every record a write changed (the gang watch starter,
    as in the ingest step).

    Returns a summary whose size depends on the number of clusters only: ``jobs`` (discovered), ``recorded``,
    ``unrecorded`` (registry writes that failed, the first few under ``unrecorded_sample``) and per cluster
    its ``jobs``, ``problems`` (jobs not manageable), ``kueue_version`` and ``kinds_missing``, or its ``error``.
    """
    jobs = recorded = 0
    clusters: list[dict[str, Any]] = []
    unrecorded: list[dict[str, str]] = []
    for cluster in environment.cluster_names:
        try:
            result = discover(connector(cluster), cluster, include_pods=environment.include_pods)
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
