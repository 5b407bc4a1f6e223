"""What a backend's construct grants to: the functions whose code calls the backend's API.

Small protocols, not the constructs that make the functions: a backend needs a role to grant to, a function to
tell where things are, and a way to let its own functions start gang watches; :class:`~osprey_infra.gangs.
GangWatch` and :class:`~osprey_infra.function.OspreyFunction` have them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_

from osprey_infra.permissions import FunctionGrantee, Grantee

__all__ = ["BackendFunctionInputs", "BackendGrantees", "GangWatches"]


class GangWatches(Protocol):
    """The gang watches: the watch function (it reads a gang's readiness and applies its fallback), and who may
    start a watch."""

    @property
    def watch(self) -> FunctionGrantee: ...

    def allow_start(self, function: lambda_.Function) -> None: ...


@dataclass(frozen=True)
class BackendGrantees:
    """``ingest`` recognises the jobs whose events it records (reads); ``apply`` reads the jobs it applies to
    and writes their priorities; ``gangs`` reads readiness and stops a gang on its ``fail`` fallback."""

    ingest: Grantee
    apply: FunctionGrantee
    gangs: GangWatches


@dataclass(frozen=True)
class BackendFunctionInputs:
    """What a backend with functions of its own (EKS discovery, the Slurm bridge) builds them from: the
    registry ``table``, the control plane's shared ``environment``, ``layer`` and ``code``, the SSM
    ``policy_prefix`` they read policies under, and the ``grantees`` that call the backend."""

    grantees: BackendGrantees
    table: dynamodb.ITable
    environment: Mapping[str, str]
    layer: lambda_.ILayerVersion
    code: lambda_.Code
    policy_prefix: str
