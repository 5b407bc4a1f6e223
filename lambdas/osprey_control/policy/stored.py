"""A policy as the deployment stores it: one SSM String parameter per policy, ``<prefix>/<metadata.name>``, holding
its canonical JSON. Written by the CDK app at deploy time and by ``osprey policy apply``; read by the collect,
derive and ingest steps (:mod:`osprey_control.policy_store`) through :func:`parse_stored_policy`.

Reading is bounded before anything is parsed: a value over SSM's 8 KB, or nested deeper than
:data:`MAX_JSON_NESTING`, is refused by a linear scan, so no stored value can make the JSON decoder recurse
(4 KB of ``[`` raises ``RecursionError`` in :func:`json.loads`) or allocate without limit. Every refusal is a
:class:`StoredPolicyError` whose message names the parameter and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from osprey_control.policy.loader import policy_from_mapping
from osprey_control.policy.model import PriorityDerivationPolicy

__all__ = [
    "ADVANCED_LIMIT",
    "MAX_JSON_NESTING",
    "InvalidPolicy",
    "InvalidPolicyError",
    "StoredPolicyError",
    "json_nesting_error",
    "parameter_name",
    "parameter_tier",
    "parse_stored_policy",
    "policy_parameter_value",
]

# SSM's value limits: a Standard parameter holds 4 KB, an Advanced one 8 KB (and costs $0.05 a month).
STANDARD_LIMIT = 4096
ADVANCED_LIMIT = 8192
# The deepest valid policy is 5 levels (spec.derivationRules[i].custom.arn); the YAML reader allows 32 too.
MAX_JSON_NESTING = 32
# A value with dozens of schema errors is reported by its first few: the message goes to logs and payloads.
MAX_REPORTED_ISSUES = 5


class StoredPolicyError(ValueError):
    """A stored value that is not a valid policy; the message names the parameter and the field."""


@dataclass(frozen=True)
class InvalidPolicy:
    """A deployed policy whose stored value is refused, and what its jobs get instead: the policy's last good
    version (``fallback_version``, a parameter version), or nothing (``held``: they keep their last applied
    priority). docs/decisions.md, "A bad policy harms only its own jobs"."""

    name: str
    error: str
    fallback_version: int | None = None

    @property
    def held(self) -> bool:
        return self.fallback_version is None

    @property
    def state(self) -> str:
        """``last-good`` or ``held``: what ``osprey jobs`` shows for the policy's jobs."""
        return "held" if self.held else "last-good"

    def effect(self) -> str:
        if self.held:
            return "its jobs keep their last applied priority (no valid version to fall back to)"
        return f"its jobs are derived under its last good version ({self.fallback_version})"

    def describe(self) -> str:
        return f"policy {self.name!r} is invalid ({self.error}); {self.effect()}"

    def __str__(self) -> str:
        return self.describe()


class InvalidPolicyError(LookupError):
    """A job's policy is deployed but invalid and has no good version to fall back to: the job is not derived
    (it keeps its last applied priority) until someone fixes the parameter. A LookupError, as an unknown policy
    is, so every caller that skips a job without a policy skips this one too."""

    def __init__(self, invalid: InvalidPolicy) -> None:
        self.invalid = invalid
        super().__init__(invalid.describe())


def json_nesting_error(text: str, limit: int = MAX_JSON_NESTING) -> str | None:
    """Why ``text`` nests ``[``/``{`` deeper than ``limit`` (outside strings), or None. One linear pass with no
    recursion, so it is safe on any input a parser would choke on."""
    depth = 0
    in_string = False
    escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return f"nesting deeper than {limit} levels (character {index + 1}); a policy needs at most 5"
        elif char in "]}":
            depth -= 1
    return None


def parse_stored_policy(value: str, name: str, source: str) -> PriorityDerivationPolicy:
    """The policy stored as ``value`` in the parameter of policy ``name`` (``source``, e.g. ``ssm:/osprey/policies/x``,
    prefixes every message), or :class:`StoredPolicyError`: too large, too deep, not JSON, invalid against the
    schema (unknown fields included), or named differently from its parameter."""
    size = len(value.encode("utf-8", "replace"))
    if size > ADVANCED_LIMIT:
        raise StoredPolicyError(
            f"{source}: (document): {size} bytes; a stored policy is at most {ADVANCED_LIMIT}"
        )
    too_deep = json_nesting_error(value)
    if too_deep is not None:
        raise StoredPolicyError(f"{source}: (document): {too_deep}")
    try:
        data = json.loads(value)
    except (
        ValueError,
        RecursionError,
    ) as error:  # RecursionError cannot happen after the scan; kept as a guard
        raise StoredPolicyError(f"{source}: (document): not JSON: {str(error)[:120]}") from None
    policy, issues = policy_from_mapping(data, source)
    if policy is None:
        # The source once, then each field: ``ssm:/p/x: spec.deadband: ...; spec.derivationRules[0].weight: ...``.
        shown = "; ".join(f"{issue.path}: {issue.message}" for issue in issues[:MAX_REPORTED_ISSUES])
        more = len(issues) - MAX_REPORTED_ISSUES
        raise StoredPolicyError(f"{source}: {shown}" + (f"; and {more} more" if more > 0 else ""))
    if policy.name != name:
        raise StoredPolicyError(f"{source}: metadata.name: {policy.name!r} does not match the parameter name")
    return policy


def policy_parameter_value(policy: PriorityDerivationPolicy) -> str:
    """The canonical JSON stored in SSM: every default filled in, so readers need no defaults of their own."""
    return json.dumps(policy.model_dump(mode="json", by_alias=True), separators=(",", ":"), sort_keys=True)


def parameter_name(prefix: str, policy_name: str) -> str:
    return f"{prefix.rstrip('/')}/{policy_name}"


def parameter_tier(value: str) -> str:
    """``Standard`` or ``Advanced``, the cheapest tier that holds ``value``; ValueError when none does."""
    size = len(value.encode())
    if size > ADVANCED_LIMIT:
        raise ValueError(
            f"policy is {size} bytes as JSON; SSM allows at most {ADVANCED_LIMIT}: split it or use fewer rules"
        )
    return "Standard" if size <= STANDARD_LIMIT else "Advanced"
