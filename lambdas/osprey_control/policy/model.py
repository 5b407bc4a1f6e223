"""The ``PriorityDerivationPolicy`` document (docs/design.md §3) as pydantic v2 models.

Field names are the YAML spelling (camelCase) through aliases; the Python attributes are snake_case.
Every model forbids unknown fields and validates strictly: a string where a number belongs is an error,
never silently converted. Numbers must be finite.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    StrictBool,
    StrictStr,
    Tag,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "API_VERSION",
    "KIND",
    "METRIC_DEFAULT_RANGES",
    "Aggregation",
    "BuiltinRule",
    "CoScheduling",
    "CustomRule",
    "CustomRuleEntry",
    "GangFallback",
    "GuardSpec",
    "Metadata",
    "Metric",
    "PolicySpec",
    "PriorityDerivationPolicy",
    "ReservationSettings",
    "Scaling",
]

API_VERSION = "osprey.aws/v1"
KIND = "PriorityDerivationPolicy"

# arn:<partition>:lambda:<region>:<12-digit account>:function:<name>[:<version or alias>]
LAMBDA_ARN_PATTERN = (
    r"^arn:aws(-[a-z]+)*:lambda:[a-z]{2}(-[a-z]+)+-\d:\d{12}:function:[A-Za-z0-9_-]{1,64}"
    r"(:(\$LATEST|[0-9]+|[A-Za-z0-9_-]{1,128}))?$"
)
_DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


class Metric(StrEnum):
    """Built-in metrics. Values are in raw units (docs/design.md §3 table)."""

    GPU_UTILIZATION = "gpu_utilization"
    MEMORY_BANDWIDTH_UTILIZATION = "memory_bandwidth_utilization"
    GPU_MEMORY_UTILIZATION = "gpu_memory_utilization"
    NODE_INTERCONNECT_LATENCY = "node_interconnect_latency"
    SPOT_INTERRUPTION_RISK = "spot_interruption_risk"
    QUEUE_WAIT = "queue_wait"
    ATTAINED_SERVICE = "attained_service"
    REMAINING_TIME = "remaining_time"
    REQUESTED_GPUS = "requested_gpus"
    RESERVATION = "reservation"

    @property
    def job_level(self) -> bool:
        """True for metrics measured once per job rather than per node (they exist for queued jobs too)."""
        return self in _JOB_LEVEL_METRICS


METRIC_DEFAULT_RANGES: dict[Metric, tuple[float, float]] = {
    Metric.GPU_UTILIZATION: (0.0, 100.0),
    Metric.MEMORY_BANDWIDTH_UTILIZATION: (0.0, 100.0),
    Metric.GPU_MEMORY_UTILIZATION: (0.0, 100.0),
    Metric.NODE_INTERCONNECT_LATENCY: (0.0, 2000.0),
    Metric.SPOT_INTERRUPTION_RISK: (0.0, 1.0),
    Metric.QUEUE_WAIT: (0.0, 86400.0),
    Metric.ATTAINED_SERVICE: (0.0, 1000.0),
    Metric.REMAINING_TIME: (0.0, 259200.0),
    Metric.REQUESTED_GPUS: (1.0, 4096.0),
    Metric.RESERVATION: (0.0, 1.0),
}


_JOB_LEVEL_METRICS = frozenset(
    {
        Metric.QUEUE_WAIT,
        Metric.ATTAINED_SERVICE,
        Metric.REMAINING_TIME,
        Metric.REQUESTED_GPUS,
        Metric.RESERVATION,
    }
)


class Scaling(StrEnum):
    LINEAR = "linear"
    LOGARITHMIC = "logarithmic"
    INVERSE = "inverse"


class Aggregation(StrEnum):
    MEAN = "mean"
    MIN = "min"
    MAX = "max"


class GangFallback(StrEnum):
    SERIAL = "serial"
    REQUEUE = "requeue"
    FAIL = "fail"


# Strict numbers: ints are accepted where a number belongs (YAML `10`), strings and booleans are not,
# and an int field rejects 1.0. Enums and tuples stay lax so YAML strings and lists validate.
Weight = Annotated[float, Strict(), Field(gt=0, le=1000, allow_inf_nan=False)]
PriorityValue = Annotated[float, Strict(), Field(ge=0, le=100, allow_inf_nan=False)]
FiniteFloat = Annotated[float, Strict(), Field(allow_inf_nan=False)]


class _Document(BaseModel):
    """Base for every part of the document: YAML camelCase names, strict types, no unknown fields."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
        use_enum_values=False,
    )


class BuiltinRule(_Document):
    """A weighted rule over one built-in metric: normalise into ``range``, scale, map onto priorities."""

    metric: Metric
    weight: Weight
    scaling: Scaling
    min_priority: PriorityValue
    max_priority: PriorityValue
    range: tuple[FiniteFloat, FiniteFloat] | None = Field(
        default=None, description="[lo, hi] in the metric's raw unit; default: the metric's default range"
    )
    aggregation: Aggregation = Aggregation.MEAN

    @field_validator("max_priority")
    @classmethod
    def _max_not_below_min(cls, value: float, info: ValidationInfo) -> float:
        minimum = info.data.get("min_priority")
        if minimum is not None and value < minimum:
            raise ValueError(f"maxPriority ({value:g}) must be >= minPriority ({minimum:g})")
        return value

    @field_validator("range")
    @classmethod
    def _range_increasing(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not value[0] < value[1]:
            raise ValueError(f"range [{value[0]:g}, {value[1]:g}] must have lo < hi")
        if value is not None and not math.isfinite(value[1] - value[0]):
            raise ValueError(
                f"range [{value[0]:g}, {value[1]:g}] is too wide: hi - lo must be a finite number"
            )
        return value

    @property
    def effective_range(self) -> tuple[float, float]:
        """The configured range, else the metric's default range."""
        return self.range if self.range is not None else METRIC_DEFAULT_RANGES[self.metric]


class CustomRule(_Document):
    """A rule answered by the user's Lambda function (docs/design.md §4 custom rule contract)."""

    arn: Annotated[StrictStr, Field(pattern=LAMBDA_ARN_PATTERN)]
    fallback_priority: PriorityValue
    weight: Weight | None = Field(
        default=None, description="Weighted component when set; without it the rule is an ordered stage"
    )
    timeout_ms: Annotated[int, Strict(), Field(ge=10, le=30000)] = 1000

    @property
    def function_name(self) -> str:
        """The function name without partition, region, account or qualifier."""
        return self.arn.split(":")[6]


class CustomRuleEntry(_Document):
    """The list item form ``- custom: {...}``."""

    custom: CustomRule


def _rule_kind(value: Any) -> str | None:
    if isinstance(value, BuiltinRule):
        return "builtin"
    if isinstance(value, CustomRuleEntry):
        return "custom"
    if isinstance(value, dict):
        if "custom" in value and "metric" in value:
            return None
        if "custom" in value:
            return "custom"
        if "metric" in value:
            return "builtin"
    return None


DerivationRule = Annotated[
    Annotated[BuiltinRule, Tag("builtin")] | Annotated[CustomRuleEntry, Tag("custom")],
    Discriminator(
        _rule_kind,
        custom_error_type="rule_kind",
        custom_error_message="a rule must have exactly one of 'metric' (built-in rule) or 'custom'",
    ),
]


class CoScheduling(_Document):
    enabled: StrictBool = False
    gang_timeout_seconds: Annotated[int, Strict(), Field(ge=1, le=86400)] = 120
    required_min_workers: Annotated[int, Strict(), Field(ge=1, le=100, description="percent of workers")] = (
        100
    )
    fallback: GangFallback = GangFallback.SERIAL


class ReservationSettings(_Document):
    """How the ``reservation`` signal (:mod:`osprey_control.derivation.reservation`) sees the pool of GPUs.

    ``capacity_gpus``: the GPUs of the queue or cluster this policy's jobs run in (a Kueue ClusterQueue's
    ``nvidia.com/gpu`` quota, a Slurm partition's GPUs, a Batch compute environment's); without it the pool is
    taken to be full, so nothing is held for the head (only lifted). ``yield_fraction``: a running job that
    has held its GPUs for less than this fraction of the head's predicted wait, on its first attempt, is marked
    as yielding to the head, so that a backend which preempts on priority (Kueue ``LowerPriority``) may evict
    it to start the head now instead of draining the pool for it. 0 (the model's default) never marks one:
    it is opt-in, because it lets the backend throw away up to that much of a job's work.
    """

    capacity_gpus: Annotated[int, Strict(), Field(ge=1, le=10_000_000)] | None = None
    yield_fraction: Annotated[float, Strict(), Field(ge=0, le=1, allow_inf_nan=False)] = 0.0


class GuardSpec(_Document):
    """The guard's knobs for this policy's pools (``osprey_control.metrics.guard``; docs/policies.md, "The guard").

    ``enabled``: the guard runs for the policy's pools (several policies in one pool: only if all enable it).
    ``horizon_seconds``: how far ahead each candidate order is run. ``samples``: draws of the predicted run times
    (the first as predicted, the others with a random error). ``goodput_tolerance``: the relative goodput a
    candidate may lose against the native order in a draw and still qualify.
    """

    enabled: StrictBool = True
    horizon_seconds: Annotated[int, Strict(), Field(ge=600, le=86400)] = 21600
    # The defaults are osprey_control.guard.GuardSettings' (tests/unit/policy/test_guard_spec.py holds them equal).
    samples: Annotated[int, Strict(), Field(ge=1, le=10)] = 3
    goodput_tolerance: Annotated[float, Strict(), Field(ge=0, le=0.05, allow_inf_nan=False)] = 0.002


class PolicySpec(_Document):
    derivation_rules: Annotated[list[DerivationRule], Field(min_length=1, max_length=32)]
    co_scheduling: CoScheduling = CoScheduling()
    # An integer (docs/design.md §3): with a fractional limit, rounding the damped value half up could overshoot it.
    max_priority_change: Annotated[int, Strict(), Field(ge=1, le=100)] = 10
    initial_priority: Annotated[int, Strict(), Field(ge=0, le=100)] = 50
    deadband: Annotated[float, Strict(), Field(ge=0, le=100, allow_inf_nan=False)] = 0.0
    derivation_interval_seconds: Annotated[int, Strict(), Field(ge=10, le=86400)] = 60
    reservation: ReservationSettings = ReservationSettings()
    guard: GuardSpec = GuardSpec()

    @property
    def reads_reservation(self) -> bool:
        """A built-in rule reads the ``reservation`` signal (so the cycle must compute it)."""
        return any(
            isinstance(rule, BuiltinRule) and rule.metric is Metric.RESERVATION
            for rule in self.derivation_rules
        )

    @property
    def weight_sum(self) -> float:
        """Sum of all configured weights (built-in and weighted custom rules)."""
        total = 0.0
        for rule in self.derivation_rules:
            if isinstance(rule, BuiltinRule):
                total += rule.weight
            elif rule.custom.weight is not None:
                total += rule.custom.weight
        return total


class Metadata(_Document):
    name: Annotated[StrictStr, Field(pattern=_DNS1123_LABEL, max_length=63)]
    namespace: Annotated[StrictStr, Field(pattern=_DNS1123_LABEL, max_length=63)] = "default"
    labels: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    annotations: dict[StrictStr, StrictStr] = Field(default_factory=dict)


class PriorityDerivationPolicy(_Document):
    """One policy document. Load files with :func:`osprey_control.policy.load_policies`."""

    api_version: Literal["osprey.aws/v1"]
    kind: Literal["PriorityDerivationPolicy"]
    metadata: Metadata
    spec: PolicySpec

    @property
    def name(self) -> str:
        return self.metadata.name

    def custom_rules(self) -> list[tuple[int, CustomRule]]:
        """(index in derivationRules, rule) for every custom rule."""
        return [
            (index, rule.custom)
            for index, rule in enumerate(self.spec.derivation_rules)
            if isinstance(rule, CustomRuleEntry)
        ]
