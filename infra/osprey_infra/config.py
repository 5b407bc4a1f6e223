"""The control plane's typed, synth-time-validated configuration (CDK context ``osprey:*`` or construct props).

Validation happens in ``cdk synth``: a bad value fails the synth with the field and what is allowed, before
anything is deployed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from osprey_control.policy import DEFAULT_ALLOWED_PREFIX
from osprey_control.steps.mode import ModeSettings, check_backend_names, check_policy_names
from osprey_control.wiring import METRICS_NAMESPACE
from osprey_infra.slurm_config import SlurmBridgeConfig

__all__ = ["CONTEXT_KEYS", "ConfigError", "ControlPlaneConfig"]

Backend = Literal["sagemaker", "batch", "eks"]
SUB_MINUTE_INTERVALS = (10, 12, 15, 20, 30)
# The AWS-managed Powertools layer (account 017000801446, same name in every commercial region); the version
# is pinned so a deploy is reproducible. Override with context osprey:powertoolsLayerVersion.
POWERTOOLS_LAYER_VERSION = 18

CONTEXT_KEYS: dict[str, str] = {
    "backends": "osprey:backends",
    "cycle_interval_seconds": "osprey:cycleIntervalSeconds",
    "allowed_rule_prefix": "osprey:allowedRulePrefix",
    "metrics_namespace": "osprey:metricsNamespace",
    "per_job_metrics": "osprey:perJobMetrics",
    "registry_shards": "osprey:registryShards",
    "eks_clusters": "osprey:eksClusters",
    "eks_namespaces": "osprey:eksNamespaces",
    "powertools_layer_version": "osprey:powertoolsLayerVersion",
    "history_retention_days": "osprey:historyRetentionDays",
    "retain_registry": "osprey:retainRegistry",
    "alarm_email": "osprey:alarmEmail",
    "stale_cycle_minutes": "osprey:staleCycleMinutes",
    "failure_alarm_periods": "osprey:failureAlarmPeriods",
    "sagemaker_queue": "osprey:sagemakerQueue",
    "sagemaker_queue_name": "osprey:sagemakerQueueName",
    "sagemaker_queue_max_instances": "osprey:sagemakerQueueMaxInstances",
    "slurm": "osprey:slurm",
    "mode": "osprey:mode",
    "backend_modes": "osprey:backendModes",
    "policy_modes": "osprey:policyModes",
    "shadow_only_backends": "osprey:shadowOnlyBackends",
}
ModeName = Literal["shadow", "enforce"]


class ConfigError(ValueError):
    """Invalid control-plane configuration; the message lists each bad field, its context key and the rule."""


class ControlPlaneConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    backends: frozenset[Backend] = frozenset({"sagemaker", "batch", "eks"})
    # 60 s or a multiple of it is the scheduler's own rate; 10/12/15/20/30 s run as an inner loop of a
    # once-a-minute execution (docs/decisions.md "Sub-minute cycles").
    cycle_interval_seconds: int = Field(default=60, ge=10, le=3600)
    allowed_rule_prefix: str = Field(default=DEFAULT_ALLOWED_PREFIX, min_length=1, max_length=60)
    metrics_namespace: str = Field(default=METRICS_NAMESPACE, min_length=1, max_length=255)
    per_job_metrics: bool = False
    registry_shards: int = Field(default=16, ge=1, le=1000)
    eks_clusters: tuple[str, ...] = ()
    # The namespaces EKS discovery lists (empty: all; docs/eks.md, Access).
    eks_namespaces: tuple[str, ...] = ()
    powertools_layer_version: int = Field(default=POWERTOOLS_LAYER_VERSION, ge=1)
    history_retention_days: int = Field(default=14, ge=1, le=3650)
    retain_registry: bool = True
    alarm_email: str | None = None
    # The staleness alarm fires after this many minutes without a clean cycle. None: 10, or twice the interval
    # when that is longer (an hourly cycle is not late after 10 minutes). See ``stale_after_minutes``.
    stale_cycle_minutes: int | None = Field(default=None, ge=2, le=1440)
    # FailedShards / FailedJobs alarm after this many consecutive cycle periods with a failure: one failed
    # cycle is often a throttle the next cycle retries; three in a row is a shard or job that keeps failing.
    failure_alarm_periods: int = Field(default=3, ge=1, le=1440)
    # An AWS Batch service environment + SAGEMAKER_TRAINING job queue for the SDK's `queue` (off: bring your own).
    sagemaker_queue: bool = False
    sagemaker_queue_name: str = Field(default="osprey-sagemaker-training", min_length=1, max_length=120)
    sagemaker_queue_max_instances: int = Field(default=8, ge=1, le=10000)
    # The Slurm bridge (docs/slurm.md): off unless the context names a cluster, its slurmrestd, VPC and secret.
    slurm: SlurmBridgeConfig | None = None
    # Shadow mode (osprey_control.steps.mode, docs/deploy.md): the deployment's mode, per-backend and per-policy
    # overrides, and the backends pinned to shadow, whose write permissions are not deployed at all.
    mode: ModeName = "enforce"
    backend_modes: dict[str, ModeName] = Field(default_factory=dict)
    policy_modes: dict[str, ModeName] = Field(default_factory=dict)
    shadow_only_backends: frozenset[str] = frozenset()

    @field_validator("backends")
    @classmethod
    def _some_backend(cls, value: frozenset[str]) -> frozenset[str]:
        if not value:
            raise ValueError("name at least one of sagemaker, batch, eks")
        return value

    @field_validator("backend_modes", "shadow_only_backends")
    @classmethod
    def _mode_backends(cls, value: Any) -> Any:
        check_backend_names(value)
        return value

    @field_validator("policy_modes")
    @classmethod
    def _policy_modes(cls, value: dict[str, str]) -> dict[str, str]:
        check_policy_names(value)
        return value

    @field_validator("cycle_interval_seconds")
    @classmethod
    def _interval(cls, value: int) -> int:
        if value < 60 and value not in SUB_MINUTE_INTERVALS:
            raise ValueError(f"below 60 s the interval must divide a minute: one of {SUB_MINUTE_INTERVALS}")
        if value >= 60 and value % 60:
            raise ValueError("from 60 s up the interval must be a whole number of minutes (60, 120, ...)")
        return value

    @field_validator("allowed_rule_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", value):
            raise ValueError("a Lambda function name prefix: letters, digits, '-' and '_' only")
        return value

    @field_validator("eks_clusters")
    @classmethod
    def _clusters(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not re.fullmatch(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}", name):
                raise ValueError(f"{name!r} is not an EKS cluster name")
        return value

    @field_validator("eks_namespaces")
    @classmethod
    def _namespaces(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name):
                raise ValueError(f"{name!r} is not a Kubernetes namespace name")
        return value

    @field_validator("alarm_email")
    @classmethod
    def _email(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", value):
            raise ValueError("an e-mail address")
        return value

    @field_validator("sagemaker_queue_name")
    @classmethod
    def _queue_name(cls, value: str) -> str:
        # Batch allows 128 characters; the service environment and scheduling policy add suffixes of <= 11.
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", value):
            raise ValueError("a Batch job queue name: letters, digits, '-' and '_', starting alphanumeric")
        return value

    @model_validator(mode="after")
    def _eks_needs_clusters(self) -> ControlPlaneConfig:
        if self.eks_clusters and "eks" not in self.backends:
            raise ValueError("eks_clusters is set but 'eks' is not among backends")
        if self.sagemaker_queue and "sagemaker" not in self.backends:
            raise ValueError("sagemaker_queue is set but 'sagemaker' is not among backends")
        forced = sorted(
            name for name in self.shadow_only_backends if self.backend_modes.get(name) == "enforce"
        )
        if forced:
            raise ValueError(
                f"backend_modes sets {', '.join(forced)} to enforce, but shadow_only_backends (context "
                f"{CONTEXT_KEYS['shadow_only_backends']}) pins it to shadow: no write permission is deployed"
            )
        # Cycles finish once per interval: a shorter window would see a healthy schedule as stale.
        if (
            self.stale_cycle_minutes is not None
            and self.stale_cycle_minutes * 60 < 2 * self.cycle_interval_seconds
        ):
            raise ValueError(
                f"stale_cycle_minutes must be at least twice the cycle interval: "
                f">= {-(-2 * self.cycle_interval_seconds // 60)} with cycle_interval_seconds "
                f"{self.cycle_interval_seconds}"
            )
        # CloudWatch: evaluation periods x period at most one day for periods under an hour, 7 days otherwise.
        limit = 86400 if self.metric_period_seconds < 3600 else 604800
        if self.failure_alarm_periods * self.metric_period_seconds > limit:
            raise ValueError(
                f"failure_alarm_periods x the cycle period ({self.metric_period_seconds} s) exceeds CloudWatch's "
                f"{limit // 86400}-day alarm window: at most {limit // self.metric_period_seconds}"
            )
        return self

    @property
    def modes(self) -> ModeSettings:
        """The mode settings ``/osprey/config`` publishes (read by the apply step and the gang watch)."""
        return ModeSettings.build(
            {
                "default": self.mode,
                "backends": self.backend_modes,
                "policies": self.policy_modes,
                "shadowOnly": self.shadow_only_backends,
            }
        )

    def writes(self, backend: str) -> bool:
        """Whether ``backend``'s write permissions may be deployed: it is not pinned to shadow (the constructs
        also require it to be among ``backends``)."""
        return backend not in self.shadow_only_backends

    @property
    def cycles_per_execution(self) -> int:
        """How many cycles one scheduled execution runs (more than one only below a minute)."""
        return 60 // self.cycle_interval_seconds if self.cycle_interval_seconds < 60 else 1

    @property
    def schedule_minutes(self) -> int:
        return max(1, self.cycle_interval_seconds // 60)

    @property
    def metric_period_seconds(self) -> int:
        """The period of the per-cycle metrics' graphs and alarms: a cycle publishes at most once in it."""
        return max(60, self.cycle_interval_seconds)

    @property
    def stale_after_minutes(self) -> int:
        """``stale_cycle_minutes``, or its default: 10, or twice the interval when that is longer."""
        if self.stale_cycle_minutes is not None:
            return self.stale_cycle_minutes
        return max(10, -(-2 * self.cycle_interval_seconds // 60))

    @classmethod
    def build(cls, values: Mapping[str, Any]) -> ControlPlaneConfig:
        """Validate ``values`` (field names), raising :class:`ConfigError` naming each bad field."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as error:
            lines = []
            for problem in error.errors():
                field = ".".join(str(part) for part in problem["loc"]) or "(config)"
                top = str(problem["loc"][0]) if problem["loc"] else ""
                where = f" (context {CONTEXT_KEYS[top]})" if top in CONTEXT_KEYS else ""
                lines.append(f"{field}{where}: {problem['msg']}")
            raise ConfigError("invalid Osprey configuration:\n  " + "\n  ".join(lines)) from None

    @classmethod
    def from_context(cls, lookup: Any) -> ControlPlaneConfig:
        """From CDK context: ``lookup(key)`` returns the value or None. ``-c`` values arrive as strings, so
        lists may be comma-separated or JSON, and numbers/booleans are parsed from text."""
        values: dict[str, Any] = {}
        for field, key in CONTEXT_KEYS.items():
            raw = lookup(key)
            if raw is None:
                continue
            values[field] = _parse(field, raw)
        return cls.build(values)


def _parse(field: str, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if field in {"backend_modes", "policy_modes"}:
        # JSON ({"batch": "enforce"}) or name=mode pairs ("batch=enforce,eks=shadow")
        if text.startswith("{"):
            return json.loads(text)
        pairs = [part.strip() for part in text.split(",") if part.strip()]
        return dict(part.partition("=")[::2] for part in pairs) if all("=" in p for p in pairs) else text
    if field in {"backends", "eks_clusters", "eks_namespaces", "shadow_only_backends"}:
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    if field == "slurm":
        try:
            return json.loads(text)
        except ValueError:
            return text  # validation then says a JSON object is expected
    if field in {"per_job_metrics", "retain_registry", "sagemaker_queue"}:
        if text.lower() in {"true", "false"}:
            return text.lower() == "true"
        return text
    if field in {
        "cycle_interval_seconds",
        "registry_shards",
        "powertools_layer_version",
        "history_retention_days",
        "sagemaker_queue_max_instances",
        "stale_cycle_minutes",
        "failure_alarm_periods",
    }:
        return int(text) if text.lstrip("-").isdigit() else text
    return text
