"""Which custom-rule functions a deployment may invoke, checked the same way everywhere.

One implementation for three callers: the derive step refuses a rule it may not call (fallback ``not-allowed``,
no AccessDenied every cycle), ``cdk synth`` refuses to deploy a policy naming one, and ``osprey policy validate``
refuses it when given the deployment's settings. At synth some facts can be unknown (an environment-agnostic
stack's account and region are CloudFormation tokens): each fact left ``None`` is simply not checked.

Pure Python (no boto3), so the CLI can use it without the ``aws`` extra.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from osprey_control.policy.loader import LoadedPolicy, PolicyIssue

__all__ = ["DEFAULT_ALLOWED_PREFIX", "RuleAllowList", "rule_arn_issues"]

# The derive role may invoke only functions named with this prefix: a narrower one than ``osprey-`` keeps a
# stack named ``osprey-*`` from being able to invoke its own control-plane functions as rules.
DEFAULT_ALLOWED_PREFIX = "osprey-rule-"
_PARTITIONS = {"cn-": "aws-cn", "us-gov-": "aws-us-gov"}


def partition_of(region: str) -> str | None:
    """The partition of ``region``; None for the isolated ones (``*-iso*``), whose names this does not know."""
    if "-iso" in region:
        return None
    return next((partition for prefix, partition in _PARTITIONS.items() if region.startswith(prefix)), "aws")


@dataclass(frozen=True)
class RuleAllowList:
    """Which functions a deployment may invoke: its partition, account and region, names with ``prefix``.

    ``None`` for a fact means it is unknown here and not checked (the run-time derive step always knows the
    account; the region is left to IAM there, whose grant names the deployment's region).
    """

    account: str | None
    prefix: str = DEFAULT_ALLOWED_PREFIX
    partition: str | None = "aws"
    region: str | None = None

    @classmethod
    def for_deployment(
        cls, prefix: str = DEFAULT_ALLOWED_PREFIX, *, account: str | None = None, region: str | None = None
    ) -> RuleAllowList:
        """A deployment's allow-list from what is known of it (the partition follows from the region)."""
        return cls(account, prefix, partition=partition_of(region) if region else None, region=region)

    def problem(self, arn: str) -> str | None:
        """Why ``arn`` may not be invoked, or None."""
        parts = arn.split(":")
        if len(parts) < 7 or parts[2] != "lambda" or parts[5] != "function":
            return f"{arn} is not a Lambda function ARN"
        if self.partition is not None and parts[1] != self.partition:
            return f"{arn} is in partition {parts[1]}, the control plane runs in {self.partition}"
        if self.account is not None and parts[4] != self.account:
            return f"{arn} is in account {parts[4]}; only functions in {self.account} may be invoked"
        if self.region is not None and parts[3] != self.region:
            return f"{arn} is in region {parts[3]}; only functions in {self.region} may be invoked"
        if not parts[6].startswith(self.prefix):
            return f"{arn}: function name must start with {self.prefix!r} (the deployment's allowed prefix)"
        return None

    def describe(self) -> str:
        """What is allowed, in words (what an error ends with)."""
        where = [
            f"account {self.account}" if self.account else "",
            f"region {self.region}" if self.region else "",
            f"partition {self.partition}" if self.partition else "",
        ]
        place = ", ".join(part for part in where if part)
        return f"Lambda functions named {self.prefix}*" + (f" in {place}" if place else "")


def rule_arn_issues(policies: Iterable[LoadedPolicy], allow: RuleAllowList) -> list[PolicyIssue]:
    """One error per custom rule ``allow`` refuses, with its file and field path."""
    issues: list[PolicyIssue] = []
    for loaded in policies:
        for index, rule in loaded.policy.custom_rules():
            problem = allow.problem(rule.arn)
            if problem is not None:
                issues.append(
                    PolicyIssue(
                        loaded.source,
                        f"spec.derivationRules[{index}].custom.arn",
                        f"{problem}; allowed: {allow.describe()}",
                    )
                )
    return issues
