"""The settings every handler shares, read from the environment the CDK app sets (osprey_control.wiring)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from osprey_control.aws import client_for
from osprey_control.steps.mode import ModeSettings, read_modes
from osprey_control.wiring import (
    CONFIG_PARAMETER_VARIABLE,
    METRICS_NAMESPACE,
    METRICS_NAMESPACE_VARIABLE,
    POLICY_PREFIX,
    POLICY_PREFIX_VARIABLE,
    REGISTRY_SHARDS_VARIABLE,
    TABLE_NAME_VARIABLE,
)

__all__ = ["HandlerSettings", "ModeReaderSettings", "PolicyReaderSettings"]


class HandlerSettings(BaseModel):
    """Registry table, its shards and the metrics namespace; subclasses add their own variables."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    table_name: str = Field(alias=TABLE_NAME_VARIABLE, min_length=3)
    shards: int = Field(default=16, alias=REGISTRY_SHARDS_VARIABLE, ge=1, le=1000)
    metrics_namespace: str = Field(default=METRICS_NAMESPACE, alias=METRICS_NAMESPACE_VARIABLE, min_length=1)


class PolicyReaderSettings(HandlerSettings):
    """A handler that reads the deployed policies from SSM."""

    policy_prefix: str = Field(default=POLICY_PREFIX, alias=POLICY_PREFIX_VARIABLE, pattern=r"^/.*[^/]$")


class ModeReaderSettings(HandlerSettings):
    """A handler that writes to backends (apply, the gang watch): it reads the shadow/enforce mode from the
    deployment's config parameter on every invocation (none set: enforce everywhere)."""

    config_parameter: str | None = Field(default=None, alias=CONFIG_PARAMETER_VARIABLE, pattern=r"^/.*[^/]$")

    def modes(self, ssm: Any = None) -> ModeSettings:
        if self.config_parameter is None:
            return ModeSettings()
        return read_modes(client_for("ssm", ssm), self.config_parameter)
