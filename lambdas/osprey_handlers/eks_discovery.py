"""Lambda: discover Osprey jobs on the configured EKS clusters (Powertools Logger + one call into logic).

Environment: ``OSPREY_EKS_CLUSTERS`` (comma-separated cluster names), ``OSPREY_EKS_INCLUDE_PODS``
(``true``/``false``, default true). Each observation goes to a sink callback (the registry write, wired in
by the caller) and is returned as a JSON-able dict. One cluster's failure is reported, never fatal.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, field_validator

from osprey_control.eks import KubernetesApiError, KubernetesClient, connect, discover

__all__ = ["EksDiscoveryEnvironment", "Sink", "handler", "run_discovery"]

logger = Logger()

Sink = Callable[[dict[str, Any]], None]
_CLIENTS: dict[str, KubernetesClient] = {}  # per warm container: the token cache lives in the client


class EksDiscoveryEnvironment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster_names: tuple[str, ...] = Field(min_length=1)
    include_pods: bool = True

    @field_validator("cluster_names", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> EksDiscoveryEnvironment:
        env = os.environ if environ is None else environ
        clusters = env.get("OSPREY_EKS_CLUSTERS", "")
        if not clusters.strip():
            raise ValueError("set OSPREY_EKS_CLUSTERS to a comma-separated list of EKS cluster names")
        include = env.get("OSPREY_EKS_INCLUDE_PODS", "true").strip().lower() not in ("false", "0")
        return cls(cluster_names=clusters, include_pods=include)


def _cached_connect(cluster: str) -> KubernetesClient:
    if cluster not in _CLIENTS:
        _CLIENTS[cluster] = connect(cluster)
    return _CLIENTS[cluster]


def run_discovery(
    environment: EksDiscoveryEnvironment,
    sink: Sink | None = None,
    *,
    connector: Callable[[str], KubernetesClient] = _cached_connect,
) -> dict[str, Any]:
    """Discover every configured cluster; ``sink`` receives each observation dict as it is found."""
    observations: list[dict[str, Any]] = []
    clusters: list[dict[str, Any]] = []
    for cluster in environment.cluster_names:
        try:
            result = discover(connector(cluster), cluster, include_pods=environment.include_pods)
        except Exception as error:
            # Any failure (DescribeCluster, STS, the API server) is this cluster's; the others still run.
            _CLIENTS.pop(cluster, None)
            reason = (
                str(error) if isinstance(error, KubernetesApiError) else f"{type(error).__name__}: {error}"
            )
            logger.exception("eks discovery failed", extra={"cluster": cluster, "error": reason})
            clusters.append({"cluster": cluster, "error": reason})
            continue
        summary = result.to_dict()
        for item in summary["observations"]:
            if sink is not None:
                sink(item)
            observations.append(item)
        for problem in summary["problems"]:
            logger.warning("osprey job not manageable", extra=problem)
        logger.info(
            "eks cluster discovered",
            extra={"cluster": cluster, "jobs": len(summary["observations"]),
                   "kueue_version": result.kueue_version, "kinds_missing": result.kinds_missing},
        )  # fmt: skip
        clusters.append({k: v for k, v in summary.items() if k != "observations"})
    return {"observations": observations, "clusters": clusters}


@logger.inject_lambda_context
def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    # Looked up at call time so tests can substitute the connector.
    return run_discovery(EksDiscoveryEnvironment.from_environ(), connector=_cached_connect)
