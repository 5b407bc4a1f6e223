"""Where the cost model's artifacts come from (the only I/O of :mod:`osprey.cost`): a synthesized template file,
or the CDK app synthesized in-process (needs this repository's ``infra/`` and Node.js, about 20 s), and the
CloudWatch agent configuration."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from osprey_control.registry.model import JobRecord

__all__ = [
    "DEFAULT_AGENT_CONFIG",
    "DEFAULT_TEMPLATE",
    "REPO_ROOT",
    "SHIPPED_POLICIES",
    "load_json",
    "shipped_needs",
    "synthesize",
]

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_TEMPLATE = REPO_ROOT / "cdk.out" / "Osprey.template.json"  # what `npx cdk synth` writes
DEFAULT_AGENT_CONFIG = REPO_ROOT / "infra" / "agent" / "cloudwatch-agent-gpu.json"
SHIPPED_POLICIES = REPO_ROOT / "policies"


class _Shipped:
    def __init__(self, policies: dict[str, Any]) -> None:
        self._policies = policies

    def get(self, name: str) -> Any:
        if name not in self._policies:
            raise LookupError(name)
        return self._policies[name]


def shipped_needs() -> Callable[[JobRecord], frozenset[str]]:
    """What each job's policy reads, for the policies shipped in ``policies/`` (the synthetic fleet runs one of
    them, ``osprey cost --policy``): the collector's ``needs`` as the collect step builds it from its policies."""
    from osprey_control.collect.needs import needs_from_policies  # noqa: PLC0415
    from osprey_control.derivation import compile_policy  # noqa: PLC0415
    from osprey_control.policy import load_policies  # noqa: PLC0415

    compiled = {policy.name: compile_policy(policy) for policy in load_policies([SHIPPED_POLICIES])}
    return needs_from_policies(_Shipped(compiled))


def shipped_policy_names() -> list[str]:
    """The names of the policies shipped in ``policies/`` (what ``osprey cost --policy`` may name)."""
    from osprey_control.policy import load_policies  # noqa: PLC0415

    return sorted(policy.name for policy in load_policies([SHIPPED_POLICIES]))


def load_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; OSError or ValueError with the reason otherwise."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def synthesize(context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``Osprey`` stack's template from ``infra/app.py`` (cdk-nag off: it changes nothing in the template)."""
    infra = REPO_ROOT / "infra"
    if not (infra / "app.py").is_file():
        raise FileNotFoundError(f"{infra / 'app.py'} not found: pass a synthesized template instead")
    if str(infra) not in sys.path:
        sys.path.insert(0, str(infra))
    # jsii prints a Node end-of-life banner on Node 20 (the version .ci/setup uses); it is noise for a cost table.
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import aws_cdk as cdk  # noqa: PLC0415 - only when synthesizing

    from app import build_app  # noqa: PLC0415 - infra/app.py

    app = build_app(cdk.App(context=context) if context else None, nag=False)
    template: dict[str, Any] = app.synth().get_stack_by_name("Osprey").template
    return template
