"""The Osprey stack: one ``OspreyControlPlane`` (which carries its own justified cdk-nag acknowledgements)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from osprey_infra.config import ControlPlaneConfig
from osprey_infra.control_plane import OspreyControlPlane

__all__ = ["OspreyStack"]


class OspreyStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy_paths: Sequence[str | Path],
        config: ControlPlaneConfig | None = None,
        deploy_environment: cdk.Environment | None = None,
        **kwargs: Any,
    ) -> None:
        """``deploy_environment``: see :class:`OspreyControlPlane` (custom-rule checks of an
        environment-agnostic stack)."""
        super().__init__(scope, construct_id, **kwargs)
        self.control_plane = OspreyControlPlane(
            self,
            "ControlPlane",
            policy_paths=policy_paths,
            config=config,
            deploy_environment=deploy_environment,
        )
        self.policies = self.control_plane.policies
