"""Shadow or enforce: whether the control plane writes what it decides to a job's backend (issue 30, item 1).

The deployment's setting (CDK context ``osprey:mode``, ``osprey:backendModes``, ``osprey:policyModes``,
``osprey:shadowOnlyBackends``; validated at synth) is published in ``/osprey/config`` under ``mode`` and read
from there by the apply step and the gang watch on every invocation, so a changed parameter (a ``cdk deploy``
of the context, which changes no code) takes effect on the next cycle. In shadow everything runs (ingest,
collect, derive, the gang watch's observation, history) and nothing is written to the backend: the apply step
records the value it would have written (``shadow_priority``, an ``APPLY#`` history line with outcome
``shadow``) and leaves the job pending, so the job's first enforce cycle applies it like any other.

Which mode a job is in (:meth:`ModeSettings.for_job`), the decision recorded in docs/decisions.md:

1. a backend in ``shadow_only`` is always shadow (its write permissions are not deployed);
2. else the overrides that name the job (its policy's in ``policies``, its backend's in ``backends``): shadow if
   either says shadow, enforce if one says enforce and neither says shadow (the cautious one wins);
3. else the deployment's ``default`` (``enforce``: what every deployment did before the setting existed).

Pure: pydantic only, no AWS code; infra validates the context with it, the CLI reads it back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from osprey_control.registry import Backend

__all__ = [
    "MODE_BACKENDS",
    "MODE_KEY",
    "Mode",
    "ModeError",
    "ModeSettings",
    "check_backend_names",
    "check_policy_names",
    "mode_backend",
    "read_modes",
]

# The key of ``/osprey/config`` that holds the mode settings.
MODE_KEY = "mode"
# The backends a mode names: the registry's backends as the deployment configures them (SageMaker service jobs
# of the training queue are SageMaker's).
MODE_BACKENDS = ("sagemaker", "batch", "eks", "slurm")
_POLICY_NAME = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"  # metadata.name: a DNS-1123 label


class Mode(StrEnum):
    SHADOW = "shadow"
    ENFORCE = "enforce"


class ModeError(ValueError):
    """The mode settings are invalid; the message names the field and what is allowed."""


def mode_backend(backend: Backend) -> str:
    """The name a mode setting uses for a registry backend (``sagemaker-queued`` is ``sagemaker``)."""
    return "sagemaker" if backend is Backend.SAGEMAKER_QUEUED else backend.value


def check_backend_names(names: Iterable[str]) -> None:
    """ValueError naming each of ``names`` that is not a backend a mode can name (:data:`MODE_BACKENDS`)."""
    unknown = sorted(name for name in names if name not in MODE_BACKENDS)
    if unknown:
        raise ValueError(
            f"unknown backend {', '.join(map(repr, unknown))}: one of {', '.join(MODE_BACKENDS)}"
        )


def check_policy_names(names: Iterable[str]) -> None:
    """ValueError naming each of ``names`` that cannot be a policy's ``metadata.name`` (a DNS-1123 label)."""
    bad = sorted(name for name in names if not re.fullmatch(_POLICY_NAME, name))
    if bad:
        raise ValueError(
            f"{', '.join(map(repr, bad))} is not a policy name (metadata.name: a DNS-1123 label)"
        )


class ModeSettings(BaseModel):
    """The deployment's mode, its per-backend and per-policy overrides and the shadow-only backends."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    default: Mode = Mode.ENFORCE
    backends: dict[str, Mode] = Field(default_factory=dict)
    policies: dict[str, Mode] = Field(default_factory=dict)
    shadow_only: frozenset[str] = Field(default_factory=frozenset, alias="shadowOnly")

    @field_validator("backends", "shadow_only")
    @classmethod
    def _known_backends(cls, value: Any) -> Any:
        check_backend_names(value)
        return value

    @field_validator("policies")
    @classmethod
    def _policy_names(cls, value: dict[str, Mode]) -> dict[str, Mode]:
        check_policy_names(value)
        return value

    @model_validator(mode="after")
    def _shadow_only_stays_shadow(self) -> ModeSettings:
        forced = sorted(name for name in self.shadow_only if self.backends.get(name) is Mode.ENFORCE)
        if forced:
            raise ValueError(
                f"backend {', '.join(forced)} is shadow-only (no write permission deployed) and cannot be "
                "set to enforce: take it out of shadowOnlyBackends first"
            )
        return self

    def for_job(self, backend: Backend, policy: str) -> Mode:
        """The mode of a job of ``backend`` under ``policy`` (the rules in the module docstring)."""
        return self.explain(backend, policy)[0]

    def explain(self, backend: Backend, policy: str) -> tuple[Mode, str]:
        """The job's mode and which setting decided it, in words (recorded with each shadow outcome)."""
        name = mode_backend(backend)
        if name in self.shadow_only:
            return Mode.SHADOW, f"backend {name} is shadow-only"
        named = [
            (mode, what)
            for mode, what in (
                (self.policies.get(policy), f"policy {policy}"),
                (self.backends.get(name), f"backend {name}"),
            )
            if mode is not None
        ]
        for wanted in (Mode.SHADOW, Mode.ENFORCE):
            for mode, what in named:
                if mode is wanted:
                    return mode, f"{what} is {mode.value}"
        return self.default, f"the deployment's default is {self.default.value}"

    def may_enforce(self, backend: Backend) -> bool:
        """Whether any job of ``backend`` may be written (so the backend's own housekeeping may run)."""
        name = mode_backend(backend)
        if name in self.shadow_only or self.backends.get(name) is Mode.SHADOW:
            return False
        if self.backends.get(name) is Mode.ENFORCE or self.default is Mode.ENFORCE:
            return True
        return any(mode is Mode.ENFORCE for mode in self.policies.values())

    @property
    def all_enforce(self) -> bool:
        """Nothing is in shadow (the setting as every deployment had it before it existed)."""
        return (
            self.default is Mode.ENFORCE
            and not self.shadow_only
            and all(mode is Mode.ENFORCE for mode in (*self.backends.values(), *self.policies.values()))
        )

    def to_config(self) -> dict[str, Any]:
        """The ``mode`` value of ``/osprey/config``."""
        return {
            "default": self.default.value,
            "backends": {name: mode.value for name, mode in sorted(self.backends.items())},
            "policies": {name: mode.value for name, mode in sorted(self.policies.items())},
            "shadowOnly": sorted(self.shadow_only),
        }

    @classmethod
    def build(cls, values: Mapping[str, Any] | None) -> ModeSettings:
        """From ``/osprey/config``'s ``mode`` (absent: enforce everywhere, the setting of a deployment made
        before it existed); :class:`ModeError` naming each bad field."""
        if values is None:
            return cls()
        try:
            return cls.model_validate(dict(values))
        except ValidationError as error:
            lines = [
                f"mode.{'.'.join(str(part) for part in problem['loc']) or '(settings)'}: {problem['msg']}"
                for problem in error.errors()
            ]
            raise ModeError("invalid Osprey mode settings:\n  " + "\n  ".join(lines)) from None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ModeSettings:
        """From the whole ``/osprey/config`` document."""
        value = config.get(MODE_KEY)
        if value is not None and not isinstance(value, Mapping):
            raise ModeError(
                f"mode: expected an object with default, backends, policies, shadowOnly, got {value!r}"
            )
        return cls.build(value)


def read_modes(ssm: Any, parameter: str) -> ModeSettings:
    """The mode settings in the deployment's config parameter (``/osprey/config``), read now: the apply step
    and the gang watch call this on every invocation, so a changed parameter counts from the next cycle. A
    parameter that cannot be read or parsed raises: the step then writes nothing, rather than guess a mode."""
    value = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
    try:
        config = json.loads(value)
    except ValueError as error:
        raise ModeError(f"{parameter} is not JSON ({error}): cannot tell shadow from enforce") from None
    if not isinstance(config, Mapping):
        raise ModeError(f"{parameter} is not a JSON object: cannot tell shadow from enforce")
    return ModeSettings.from_config(config)
