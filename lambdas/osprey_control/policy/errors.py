"""Turn pydantic validation errors into ``field.path: message; allowed: ...`` lines a user can act on."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from osprey_control.policy.model import (
    Aggregation,
    BuiltinRule,
    CoScheduling,
    CustomRule,
    CustomRuleEntry,
    GangFallback,
    GuardSpec,
    Metadata,
    Metric,
    PolicySpec,
    PriorityDerivationPolicy,
    ReservationSettings,
    Scaling,
)

__all__: list[str] = []

_DNS_LABEL = (
    "a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit, "
    "at most 63 characters"
)
_PRIORITY = "a finite number in [0, 100]"

# What each field accepts, keyed by its YAML name: appended to every error about that field.
ALLOWED: dict[str, str] = {
    "apiVersion": "osprey.aws/v1",
    "kind": "PriorityDerivationPolicy",
    "metadata": "a mapping with name and optional namespace, labels, annotations",
    "name": _DNS_LABEL,
    "namespace": _DNS_LABEL,
    "labels": "a mapping of string keys to string values",
    "annotations": "a mapping of string keys to string values",
    "spec": "a mapping with derivationRules and optional coScheduling, maxPriorityChange, initialPriority, "
    "deadband, derivationIntervalSeconds, reservation, guard",
    "derivationRules": "a list of 1 to 32 rules, each a built-in rule ({metric, weight, scaling, "
    "minPriority, maxPriority}) or a custom rule ({custom: {arn, fallbackPriority}})",
    "metric": "one of " + ", ".join(m.value for m in Metric),
    "weight": "a finite number in (0, 1000]",
    "scaling": "one of " + ", ".join(s.value for s in Scaling),
    "minPriority": _PRIORITY,
    "maxPriority": _PRIORITY + ", at least minPriority",
    "fallbackPriority": _PRIORITY,
    "range": "two finite numbers [lo, hi] in the metric's raw unit with lo < hi",
    "aggregation": "one of " + ", ".join(a.value for a in Aggregation),
    "custom": "a mapping with arn, fallbackPriority and optional weight, timeoutMs",
    "arn": "a Lambda function ARN arn:<partition>:lambda:<region>:<12-digit account>:function:<name>"
    "[:<version or alias>], without wildcards",
    "timeoutMs": "an integer 10..30000",
    "coScheduling": "a mapping with optional enabled, gangTimeoutSeconds, requiredMinWorkers, fallback",
    "enabled": "true or false",
    "gangTimeoutSeconds": "an integer 1..86400",
    "requiredMinWorkers": "an integer percent 1..100",
    "fallback": "one of " + ", ".join(f.value for f in GangFallback),
    "maxPriorityChange": "an integer 1..100",
    "initialPriority": "an integer 0..100",
    "deadband": "a number 0..100",
    "derivationIntervalSeconds": "an integer 10..86400",
    "reservation": "a mapping with optional capacityGpus, yieldFraction",
    "capacityGpus": "an integer 1..10000000",
    "yieldFraction": "a number 0..1",
    "guard": "a mapping with optional enabled, horizonSeconds, samples, goodputTolerance",
    "horizonSeconds": "an integer 600..86400",
    "samples": "an integer 1..10",
    "goodputTolerance": "a number 0..0.05",
}

_CONTAINER_MODELS: dict[str, type[BaseModel]] = {
    "metadata": Metadata,
    "spec": PolicySpec,
    "coScheduling": CoScheduling,
    "reservation": ReservationSettings,
    "guard": GuardSpec,
}
_RULE_TAGS: dict[str, type[BaseModel]] = {"builtin": BuiltinRule, "custom": CustomRuleEntry}


def _strip_union_tags(loc: Sequence[int | str]) -> list[int | str]:
    """Drop the discriminator tag pydantic inserts after ``derivationRules[i]``."""
    cleaned: list[int | str] = []
    for position, part in enumerate(loc):
        previous = loc[position - 1] if position else None
        before = loc[position - 2] if position > 1 else None
        if part in _RULE_TAGS and isinstance(previous, int) and before == "derivationRules":
            continue
        cleaned.append(part)
    return cleaned


def format_path(loc: Sequence[int | str]) -> str:
    """``("spec", "derivationRules", 1, "weight")`` → ``spec.derivationRules[1].weight``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part == "[key]":
            text += " (key)"
        else:
            text += f".{part}" if text else str(part)
    return text


def _model_at(raw_loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model whose fields live at ``raw_loc`` (a location that still has the union tags)."""
    if not raw_loc:
        return PriorityDerivationPolicy
    last = raw_loc[-1]
    if isinstance(last, str) and last in _RULE_TAGS and len(raw_loc) >= 2 and isinstance(raw_loc[-2], int):
        return _RULE_TAGS[last]
    if last == "custom":
        return CustomRule
    if isinstance(last, str):
        return _CONTAINER_MODELS.get(last)
    return None


def _field_names(model: type[BaseModel]) -> list[str]:
    return [field.validation_alias or name for name, field in model.model_fields.items()]  # type: ignore[misc]


def _shown(value: Any) -> str:
    if isinstance(value, dict | list):
        return ""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**18:
        return " (got an integer too large to be meaningful here)"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f" (got {text})"


def describe_error(error: ErrorDetails) -> tuple[str, str]:
    """(field path, message) for one pydantic error."""
    raw_loc = list(error["loc"])
    loc = _strip_union_tags(raw_loc)
    path = format_path(loc)
    field = next((part for part in reversed(loc) if isinstance(part, str) and part != "[key]"), "")
    # Inside a string map (labels, annotations) the last part is a user key, not a field name.
    if len(loc) >= 3 and loc[-1] == "[key]":
        field = str(loc[-3])
    elif len(loc) >= 2 and loc[-2] in ("labels", "annotations"):
        field = str(loc[-2])
    kind = error["type"]

    if kind == "extra_forbidden":
        model = _model_at(raw_loc[:-1])
        fields = _field_names(model) if model else []
        unknown = str(raw_loc[-1])
        hint = difflib.get_close_matches(unknown, fields, n=1)
        suggestion = f"; did you mean '{hint[0]}'?" if hint else ""
        listing = f"; allowed fields here: {', '.join(fields)}" if fields else ""
        return path, f"unknown field '{unknown}'{suggestion}{listing}"
    if kind == "missing":
        allowed = ALLOWED.get(field)
        return path, "required field is missing" + (f"; expected {allowed}" if allowed else "")
    if kind == "rule_kind":
        return path, f"{error['msg']}; allowed: {ALLOWED['derivationRules']}"

    if kind == "value_error":
        return path, error["msg"].removeprefix("Value error, ")
    message = error["msg"]
    if kind in ("enum", "literal_error", "string_pattern_mismatch"):
        message = "invalid value"
    message += _shown(error.get("input"))
    allowed = ALLOWED.get(field)
    if allowed:
        message += f"; allowed: {allowed}"
    if kind in ("enum", "literal_error") and isinstance(error.get("input"), str):
        choices = [choice.strip() for choice in ALLOWED.get(field, "").removeprefix("one of ").split(",")]
        hint = difflib.get_close_matches(error["input"], choices, n=1)
        if hint and hint[0] != error["input"]:
            message += f"; did you mean '{hint[0]}'?"
    return path, message
