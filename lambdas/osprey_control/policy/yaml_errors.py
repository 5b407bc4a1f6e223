"""The error of the safe YAML reader, in a module of its own so that code which only catches it (the policy
loader, the metrics-file reader) never imports PyYAML: the Lambda bundle has no PyYAML and the deployed
functions read policies as JSON from SSM."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["UnsafeYamlError"]


@dataclass(frozen=True)
class UnsafeYamlError(Exception):
    """Why a YAML text was refused. ``location`` is a field path or ``line L, column C``."""

    document: int
    location: str
    message: str
