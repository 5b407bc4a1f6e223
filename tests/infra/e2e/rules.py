"""Custom-rule Lambda handlers the e2e test deploys as the user's own functions (DESIGN §4 contract)."""

from __future__ import annotations

from typing import Any

__all__ = ["crash"]


def crash(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # A rule with a bug: the control plane must fall back to the rule's fallbackPriority, not fail the cycle.
    raise RuntimeError(f"rule bug while scoring {event.get('job', {}).get('name')}")
