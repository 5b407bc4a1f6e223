"""The Osprey stack: composes the control plane's constructs (more arrive with issue 5)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from osprey_infra.policy_store import PolicyStore

__all__ = ["OspreyStack"]


class OspreyStack(cdk.Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, policy_paths: Sequence[str | Path], **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.policies = PolicyStore(self, "Policies", policy_paths=policy_paths)
