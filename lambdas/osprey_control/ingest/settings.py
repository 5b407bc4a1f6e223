"""The ingest Lambda's configuration, from its environment variables."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from osprey_control.wiring import (
    GANG_STATE_MACHINE_VARIABLE,
    HISTORY_RETENTION_VARIABLE,
    METRICS_NAMESPACE,
    METRICS_NAMESPACE_VARIABLE,
    POLICY_PREFIX,
    POLICY_PREFIX_VARIABLE,
    RECOGNISE_BY_ENVIRONMENT_VARIABLE,
    REGISTRY_SHARDS_VARIABLE,
    TABLE_NAME_VARIABLE,
)

__all__ = ["IngestSettings", "SettingsError"]

ENVIRONMENT_VARIABLES = {
    "table_name": TABLE_NAME_VARIABLE,
    "shards": REGISTRY_SHARDS_VARIABLE,
    "history_retention_days": HISTORY_RETENTION_VARIABLE,
    "recognise_by_environment": RECOGNISE_BY_ENVIRONMENT_VARIABLE,
    "gang_state_machine_arn": GANG_STATE_MACHINE_VARIABLE,
    "policy_prefix": POLICY_PREFIX_VARIABLE,
    "metrics_namespace": METRICS_NAMESPACE_VARIABLE,
}


class SettingsError(ValueError):
    pass


class IngestSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    table_name: str = Field(min_length=3, max_length=255)
    shards: int = Field(default=16, ge=1, le=1000)
    history_retention_days: int = Field(default=14, ge=1, le=3650)
    # Off: only tags recognise a job, so events of unmanaged jobs cost no lookup at all.
    recognise_by_environment: bool = True
    # Set by the CDK app: co-scheduled jobs get a gang watch execution (docs/gangs.md); unset, none do.
    gang_state_machine_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:states:")
    # Where the gang settings' policies are (the policy's coScheduling block).
    policy_prefix: str = Field(default=POLICY_PREFIX, pattern=r"^/")
    # Where EventsDropped goes (the namespace of every Osprey metric).
    metrics_namespace: str = Field(default=METRICS_NAMESPACE, min_length=1, max_length=255)

    @property
    def history_retention(self) -> timedelta:
        return timedelta(days=self.history_retention_days)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> IngestSettings:
        values = {field: environ[name] for field, name in ENVIRONMENT_VARIABLES.items() if name in environ}
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            problems = [
                f"{ENVIRONMENT_VARIABLES.get(str(detail['loc'][0]), detail['loc'][0])}: {detail['msg']}"
                for detail in error.errors()
            ]
            raise SettingsError(
                "invalid ingest configuration; set these environment variables on the function: "
                + "; ".join(problems)
            ) from None
