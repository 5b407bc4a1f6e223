"""A policy as the deployment stores it: one SSM String parameter per policy, ``<prefix>/<metadata.name>``, holding
its canonical JSON. Written by the CDK app at deploy time and by ``osprey policy apply``; read by the derive step
(:mod:`osprey_control.policy_store`)."""

from __future__ import annotations

import json

from osprey_control.policy.model import PriorityDerivationPolicy

__all__ = ["parameter_name", "parameter_tier", "policy_parameter_value"]

# SSM's value limits: a Standard parameter holds 4 KB, an Advanced one 8 KB (and costs $0.05 a month).
STANDARD_LIMIT = 4096
ADVANCED_LIMIT = 8192


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
