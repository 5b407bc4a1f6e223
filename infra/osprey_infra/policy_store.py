"""Policies validated at synth time and stored as SSM parameters the derive Lambda reads.

An invalid policy set fails ``cdk synth`` with every ``FILE: FIELD.PATH: message`` line, and nothing is
synthesized. Reading files is the only I/O: no AWS call happens at synth.

Custom rules are checked against the deployment (:class:`~osprey_control.policy.RuleAllowList`, the same check
the derive step makes before every call): the name prefix always, the account and region when they are known.
An environment-agnostic stack's account and region are CloudFormation tokens; :func:`rule_allow_list` then uses
where the CDK CLI will deploy it, if it was told, and otherwise leaves them unchecked (IAM still denies the
call, and the derive step falls back with ``not-allowed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from osprey_control.policy import (
    RuleAllowList,
    load_policy_files,
    parameter_name,
    parameter_tier,
    policy_parameter_value,
    rule_arn_issues,
)
from osprey_control.wiring import POLICY_PREFIX

__all__ = [
    "DEFAULT_PARAMETER_PREFIX",
    "PolicyStore",
    "PolicySynthError",
    "policy_parameter_value",
    "rule_allow_list",
]

DEFAULT_PARAMETER_PREFIX = POLICY_PREFIX


class PolicySynthError(ValueError):
    """The policy set is invalid; the message lists every error, one per line."""


def _known(value: str | None) -> str | None:
    return None if value is None or cdk.Token.is_unresolved(value) else value


def rule_allow_list(
    stack: cdk.Stack, prefix: str, deploy_environment: cdk.Environment | None = None
) -> RuleAllowList:
    """The custom rules ``stack`` may invoke: its own account and region when concrete, else
    ``deploy_environment``'s (where an environment-agnostic stack will go), else unchecked."""
    fallback = deploy_environment or cdk.Environment()
    account = _known(stack.account) or _known(fallback.account)
    region = _known(stack.region) or _known(fallback.region)
    return RuleAllowList.for_deployment(prefix, account=account, region=region)


class PolicyStore(Construct):
    """One SSM String parameter per policy, ``<prefix>/<metadata.name>``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy_paths: Sequence[str | Path],
        parameter_prefix: str = DEFAULT_PARAMETER_PREFIX,
        allowed_rules: RuleAllowList | None = None,
    ) -> None:
        """``allowed_rules``: the custom rules the deployment may invoke (None: not checked)."""
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
        refused = rule_arn_issues(result.policies, allowed_rules) if allowed_rules else []
        if refused:
            raise PolicySynthError(
                "custom rules this deployment cannot invoke; name a function it may (context "
                "osprey:allowedRulePrefix sets the prefix) or leave the policy out:\n"
                + "\n".join(str(issue) for issue in refused)
            )
        self.parameter_prefix = parameter_prefix
        self.parameters: dict[str, ssm.StringParameter] = {}
        for loaded in result.policies:
            value = policy_parameter_value(loaded.policy)
            try:
                tier = ssm.ParameterTier[parameter_tier(value).upper()]
            except ValueError as error:
                raise PolicySynthError(f"{loaded.source}: (document): {error}") from None
            self.parameters[loaded.policy.name] = ssm.StringParameter(
                self,
                f"Policy-{loaded.policy.name}",
                parameter_name=parameter_name(parameter_prefix, loaded.policy.name),
                string_value=value,
                tier=tier,
                description=f"Osprey PriorityDerivationPolicy {loaded.policy.name} (from {Path(loaded.source).name})",
            )
