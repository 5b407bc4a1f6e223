"""Policies as the CDK app stored them: one SSM String parameter per policy, ``<prefix>/<name>``, holding the
policy's canonical JSON. Read through Powertools Parameters (one GetParametersByPath per ``max_age``)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.utilities.parameters import SSMProvider

from osprey_control.aws import client_for
from osprey_control.derivation import CompiledPolicy, compile_policy
from osprey_control.policy import PriorityDerivationPolicy, policy_from_mapping
from osprey_control.wiring import POLICY_PREFIX

__all__ = ["DEFAULT_MAX_AGE_SECONDS", "PolicySource", "UnknownPolicyError"]

DEFAULT_MAX_AGE_SECONDS = 60


class UnknownPolicyError(LookupError):
    """A job names a policy that is not deployed: permanent for that job until someone deploys it."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        super().__init__(
            f"policy {name!r} is not deployed (known: {', '.join(known) or 'none'}); add it to policies/ and "
            "deploy, or run `osprey policy apply`"
        )


class PolicySource:
    """Compiled policies by name, refreshed at most every ``max_age`` seconds.

    A parameter that does not hold a valid policy is skipped and listed in :attr:`invalid` (it can only come
    from a manual edit: the CDK app validates at synth), so one broken parameter never hides the others.
    """

    def __init__(
        self, prefix: str = POLICY_PREFIX, *, client: Any = None, max_age: int = DEFAULT_MAX_AGE_SECONDS
    ) -> None:
        self._prefix = prefix.rstrip("/")
        self._client = client
        self._max_age = max_age
        self._provider: SSMProvider | None = None
        self._compiled: dict[str, tuple[str, CompiledPolicy, PriorityDerivationPolicy]] = {}
        self.invalid: dict[str, str] = {}

    def _fetch(self) -> dict[str, str]:
        if self._provider is None:
            self._provider = SSMProvider(boto3_client=client_for("ssm", self._client))
        values = self._provider.get_multiple(self._prefix, max_age=self._max_age)
        return {str(name): str(value) for name, value in values.items()}

    def _refresh(self) -> None:
        compiled: dict[str, tuple[str, CompiledPolicy, PriorityDerivationPolicy]] = {}
        invalid: dict[str, str] = {}
        for name, raw in self._fetch().items():
            cached = self._compiled.get(name)
            if cached is not None and cached[0] == raw:  # unchanged: skip validation and compilation
                compiled[name] = cached
                continue
            source = f"ssm:{self._prefix}/{name}"
            try:
                data = json.loads(raw)
            except ValueError:
                invalid[name] = f"{source}: (document): not JSON"
                continue
            policy, errors = policy_from_mapping(data, source)
            if policy is None:
                invalid[name] = "; ".join(str(error) for error in errors)
            elif policy.name != name:
                invalid[name] = f"{source}: metadata.name: {policy.name!r} does not match the parameter name"
            else:
                compiled[name] = (raw, compile_policy(policy), policy)
        self._compiled = compiled
        self.invalid = invalid

    def names(self) -> list[str]:
        self._refresh()
        return sorted(self._compiled)

    def get(self, name: str) -> CompiledPolicy:
        """The compiled policy, or :class:`UnknownPolicyError`."""
        self._refresh()
        entry = self._compiled.get(name)
        if entry is None:
            raise UnknownPolicyError(name, sorted(self._compiled))
        return entry[1]

    def model(self, name: str) -> PriorityDerivationPolicy:
        self._refresh()
        entry = self._compiled.get(name)
        if entry is None:
            raise UnknownPolicyError(name, sorted(self._compiled))
        return entry[2]
