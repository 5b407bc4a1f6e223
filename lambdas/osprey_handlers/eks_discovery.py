"""Lambda: discover Osprey jobs on the configured EKS clusters (Powertools Logger + one call into logic).

Environment: ``OSPREY_EKS_CLUSTERS`` (comma-separated cluster names), ``OSPREY_EKS_INCLUDE_PODS``
(``true``/``false``, default true), ``OSPREY_TABLE_NAME`` and ``OSPREY_REGISTRY_SHARDS`` (the registry every
observation is written to through ``JobRegistry.apply_observation``, the same convergent merge as ingested
events). Each observation is given as a JSON-able dict to an optional sink; the function returns counts only
(it is a state of the cycle state machine, whose payload must not grow with the fleet: docs/control-plane.md,
Payload). One cluster's failure, or one job's registry write, is reported and logged, never fatal.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Protocol

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, field_validator

from osprey_control.apply_step import ERROR_CHARS, FAILURE_SAMPLE
from osprey_control.eks import KubernetesApiError, KubernetesClient, connect, discover
from osprey_control.registry.observation import JobObservation
from osprey_control.wiring import (
    EKS_CLUSTERS_VARIABLE,
    EKS_INCLUDE_PODS_VARIABLE,
    GANG_STATE_MACHINE_VARIABLE,
    POLICY_PREFIX,
    POLICY_PREFIX_VARIABLE,
    REGISTRY_SHARDS_VARIABLE,
    TABLE_NAME_VARIABLE,
)

__all__ = ["EksDiscoveryEnvironment", "ObservationStore", "Sink", "handler", "run_discovery"]

logger = Logger()

Sink = Callable[[dict[str, Any]], None]


class ObservationStore(Protocol):
    """The registry as discovery writes it (:class:`osprey_control.registry.dynamodb.JobRegistry`)."""

    def apply_observation(self, observation: JobObservation) -> Any: ...


class EksDiscoveryEnvironment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster_names: tuple[str, ...] = Field(min_length=1)
    include_pods: bool = True
    table_name: str | None = None  # None: discover and report only (nothing is recorded)
    shards: int = Field(default=16, ge=1, le=1000)
    # Set by the CDK app when gangs are deployed: co-scheduled jobs get their watch (docs/gangs.md).
    gang_state_machine_arn: str | None = None
    policy_prefix: str = POLICY_PREFIX

    @field_validator("cluster_names", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> EksDiscoveryEnvironment:
        env = os.environ if environ is None else environ
        clusters = env.get(EKS_CLUSTERS_VARIABLE, "")
        if not clusters.strip():
            raise ValueError(f"set {EKS_CLUSTERS_VARIABLE} to a comma-separated list of EKS cluster names")
        include = env.get(EKS_INCLUDE_PODS_VARIABLE, "true").strip().lower() not in ("false", "0")
        return cls(
            cluster_names=clusters,
            include_pods=include,
            table_name=env.get(TABLE_NAME_VARIABLE) or None,
            shards=int(env.get(REGISTRY_SHARDS_VARIABLE, "16")),
            gang_state_machine_arn=env.get(GANG_STATE_MACHINE_VARIABLE) or None,
            policy_prefix=env.get(POLICY_PREFIX_VARIABLE) or POLICY_PREFIX,
        )


class _ClientCache:
    """One client per cluster per warm container (its token cache lives in the client). ``cache_clear`` makes
    it look like ``functools.cache`` to whoever resets a container's caches (``osprey local`` redeploying)."""

    def __init__(self) -> None:
        self._clients: dict[str, KubernetesClient] = {}

    def __call__(self, cluster: str) -> KubernetesClient:
        if cluster not in self._clients:
            self._clients[cluster] = connect(cluster)
        return self._clients[cluster]

    def forget(self, cluster: str) -> None:
        self._clients.pop(cluster, None)

    def cache_clear(self) -> None:
        self._clients.clear()


_cached_connect = _ClientCache()


@cache
def _registry(table_name: str, shards: int) -> ObservationStore:
    from osprey_control.registry.dynamodb import JobRegistry  # noqa: PLC0415 - boto3 only when recording

    return JobRegistry(table_name, shards=shards)


def run_discovery(
    environment: EksDiscoveryEnvironment,
    sink: Sink | None = None,
    *,
    connector: Callable[[str], KubernetesClient] = _cached_connect,
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
            _cached_connect.forget(cluster)
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


@logger.inject_lambda_context
def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    environment = EksDiscoveryEnvironment.from_environ()
    registry = _registry(environment.table_name, environment.shards) if environment.table_name else None
    if registry is None:
        logger.warning("OSPREY_TABLE_NAME is not set: discovered jobs are reported, not recorded")
    # Looked up at call time so tests can substitute the connector.
    return run_discovery(
        environment, connector=_cached_connect, registry=registry, on_change=_gangs(environment)
    )


def _gangs(environment: EksDiscoveryEnvironment) -> Callable[[Any], object] | None:
    if not environment.gang_state_machine_arn or not environment.table_name:
        return None
    # Only when gangs are deployed: the policy lookup (Powertools Parameters, cached) and its imports.
    from osprey_control.derive.policies import PolicySource  # noqa: PLC0415
    from osprey_control.gang import GangRegistrar  # noqa: PLC0415

    return GangRegistrar(environment.gang_state_machine_arn, PolicySource(environment.policy_prefix))
