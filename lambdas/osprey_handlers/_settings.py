"""The settings every handler shares, read from the environment the CDK app sets (osprey_control.wiring)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from osprey_control.wiring import (
    METRICS_NAMESPACE,
    METRICS_NAMESPACE_VARIABLE,
    POLICY_PREFIX,
    POLICY_PREFIX_VARIABLE,
    REGISTRY_SHARDS_VARIABLE,
    TABLE_NAME_VARIABLE,
)

__all__ = ["HandlerSettings", "PolicyReaderSettings"]


class HandlerSettings(BaseModel):
    """Registry table, its shards and the metrics namespace; subclasses add their own variables."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    table_name: str = Field(alias=TABLE_NAME_VARIABLE, min_length=3)
    shards: int = Field(default=16, alias=REGISTRY_SHARDS_VARIABLE, ge=1, le=1000)
    metrics_namespace: str = Field(default=METRICS_NAMESPACE, alias=METRICS_NAMESPACE_VARIABLE, min_length=1)


class PolicyReaderSettings(HandlerSettings):
    """A handler that reads the deployed policies from SSM."""

    policy_prefix: str = Field(default=POLICY_PREFIX, alias=POLICY_PREFIX_VARIABLE, pattern=r"^/.*[^/]$")
