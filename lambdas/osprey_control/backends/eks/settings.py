"""The EKS discovery function's settings, from the environment the CDK construct sets (names in
:mod:`osprey_control.wiring`); a bad value fails at cold start naming its variable."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from osprey_control.wiring import (
    EKS_CLUSTERS_VARIABLE,
    EKS_INCLUDE_PODS_VARIABLE,
    EKS_NAMESPACES_VARIABLE,
    GANG_STATE_MACHINE_VARIABLE,
    POLICY_PREFIX,
    POLICY_PREFIX_VARIABLE,
    REGISTRY_SHARDS_VARIABLE,
    TABLE_NAME_VARIABLE,
)

__all__ = ["EksDiscoveryEnvironment"]

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class EksDiscoveryEnvironment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster_names: tuple[str, ...] = Field(min_length=1)
    include_pods: bool = True
    # The namespaces discovery lists (docs/eks.md, Access); empty: all of them (a cluster-wide binding).
    namespaces: tuple[str, ...] = ()
    table_name: str | None = None  # None: discover and report only (nothing is recorded)
    shards: int = Field(default=16, ge=1, le=1000)
    # Set by the CDK app when gangs are deployed: co-scheduled jobs get their watch (docs/gangs.md).
    gang_state_machine_arn: str | None = None
    policy_prefix: str = POLICY_PREFIX

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _DNS_LABEL.fullmatch(name):
                raise ValueError(
                    f"{EKS_NAMESPACES_VARIABLE}: {name!r} is not a namespace name (lowercase letters, digits and "
                    "'-', at most 63 characters, starting and ending with a letter or digit)"
                )
        return value

    @field_validator("cluster_names", "namespaces", mode="before")
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
            namespaces=env.get(EKS_NAMESPACES_VARIABLE, ""),
            table_name=env.get(TABLE_NAME_VARIABLE) or None,
            shards=int(env.get(REGISTRY_SHARDS_VARIABLE, "16")),
            gang_state_machine_arn=env.get(GANG_STATE_MACHINE_VARIABLE) or None,
            policy_prefix=env.get(POLICY_PREFIX_VARIABLE) or POLICY_PREFIX,
        )
