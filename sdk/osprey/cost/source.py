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

from osprey.checkout import find_checkout
from osprey_control.policy import shipped_policy_dir
from osprey_control.registry import JobRecord

__all__ = ["default_agent_config", "default_template", "load_json", "synthesize"]


def default_template() -> Path:
    """Where ``npx cdk synth`` writes the template, in the Osprey checkout (:func:`osprey.checkout.find_checkout`)."""
    return find_checkout() / "cdk.out" / "Osprey.template.json"


def default_agent_config() -> Path:
    """The GPU nodes' CloudWatch agent configuration that the checkout's CDK app deploys."""
    return find_checkout() / "infra" / "agent" / "cloudwatch-agent-gpu.json"


class _Shipped:
    def __init__(self, policies: dict[str, Any]) -> None:
        self._policies = policies

    def get(self, name: str) -> Any:
        if name not in self._policies:
            raise LookupError(name)
        return self._policies[name]


def shipped_needs() -> Callable[[JobRecord], frozenset[str]]:
    """What each job's policy reads, for the policies Osprey ships (the synthetic fleet runs one of
    them, ``osprey cost --policy``): the collector's ``needs`` as the collect step builds it from its policies."""
    from osprey_control.derivation import compile_policy  # noqa: PLC0415
    from osprey_control.metrics import needs_from_policies  # noqa: PLC0415
    from osprey_control.policy import load_policies  # noqa: PLC0415

    compiled = {policy.name: compile_policy(policy) for policy in load_policies([shipped_policy_dir()])}
    return needs_from_policies(_Shipped(compiled))


def shipped_policy_names() -> list[str]:
    """The names of the policies shipped in ``policies/`` (what ``osprey cost --policy`` may name)."""
    from osprey_control.policy import load_policies  # noqa: PLC0415

    return sorted(policy.name for policy in load_policies([shipped_policy_dir()]))


def load_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; OSError or ValueError with the reason otherwise."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def synthesize(context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``Osprey`` stack's template from ``infra/app.py`` (cdk-nag off: it changes nothing in the template)."""
    infra = find_checkout() / "infra"
    if str(infra) not in sys.path:
        sys.path.insert(0, str(infra))
    # jsii prints a Node end-of-life banner on Node 20 (the version .ci/setup uses); it is noise for a cost table.
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import aws_cdk as cdk  # noqa: PLC0415 - only when synthesizing

    from app import build_app  # noqa: PLC0415 - infra/app.py

    app = build_app(cdk.App(context=context) if context else None, nag=False)
    template: dict[str, Any] = app.synth().get_stack_by_name("Osprey").template
    return template
