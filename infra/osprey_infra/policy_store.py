"""Policies validated at synth time and stored as SSM parameters the derive Lambda reads.

An invalid policy set fails ``cdk synth`` with every ``FILE: FIELD.PATH: message`` line, and nothing is
synthesized. Reading files is the only I/O: no AWS call happens at synth.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import aws_ssm as ssm
from constructs import Construct

from osprey_control.policy import PriorityDerivationPolicy, load_policy_files

__all__ = ["DEFAULT_PARAMETER_PREFIX", "PolicyStore", "PolicySynthError", "policy_parameter_value"]

DEFAULT_PARAMETER_PREFIX = "/osprey/policies"
_STANDARD_LIMIT = 4096
_ADVANCED_LIMIT = 8192


class PolicySynthError(ValueError):
    """The policy set is invalid; the message lists every error, one per line."""


def policy_parameter_value(policy: PriorityDerivationPolicy) -> str:
    """The canonical JSON stored in SSM: every default filled in, so readers need no defaults of their own."""
    return json.dumps(policy.model_dump(mode="json", by_alias=True), separators=(",", ":"), sort_keys=True)


class PolicyStore(Construct):
    """One SSM String parameter per policy, ``<prefix>/<metadata.name>``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy_paths: Sequence[str | Path],
        parameter_prefix: str = DEFAULT_PARAMETER_PREFIX,
    ) -> None:
        super().__init__(scope, construct_id)
        if not parameter_prefix.startswith("/") or parameter_prefix.endswith("/"):
            raise PolicySynthError(
                f"parameter_prefix {parameter_prefix!r} must start with '/' and not end with '/'"
            )
        result = load_policy_files(policy_paths)
        if result.errors:
            raise PolicySynthError(
                "invalid policies; fix them and synth again:\n" + "\n".join(str(e) for e in result.errors)
            )
        if not result.policies:
            raise PolicySynthError(f"no policies found in {', '.join(str(p) for p in policy_paths)}")
        self.parameter_prefix = parameter_prefix
        self.parameters: dict[str, ssm.StringParameter] = {}
        for loaded in result.policies:
            value = policy_parameter_value(loaded.policy)
            if len(value.encode()) > _ADVANCED_LIMIT:
                raise PolicySynthError(
                    f"{loaded.source}: (document): policy is {len(value.encode())} bytes as JSON; SSM allows "
                    f"at most {_ADVANCED_LIMIT}: split it or use fewer rules"
                )
            tier = (
                ssm.ParameterTier.STANDARD
                if len(value.encode()) <= _STANDARD_LIMIT
                else ssm.ParameterTier.ADVANCED
            )
            self.parameters[loaded.policy.name] = ssm.StringParameter(
                self,
                f"Policy-{loaded.policy.name}",
                parameter_name=f"{parameter_prefix}/{loaded.policy.name}",
                string_value=value,
                tier=tier,
                description=f"Osprey PriorityDerivationPolicy {loaded.policy.name} (from {Path(loaded.source).name})",
            )
