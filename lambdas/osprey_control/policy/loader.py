"""Load policy files into a validated policy set, collecting every problem with its file and field path.

All paths of one call form one set: a policy name may appear once in it. Loading never raises for bad input
(:func:`load_policy_files` returns the problems); :func:`load_policies` is the raising convenience.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from osprey_control.policy.errors import describe_error
from osprey_control.policy.model import PriorityDerivationPolicy
from osprey_control.policy.yaml_errors import UnsafeYamlError

__all__ = [
    "MAX_FILE_BYTES",
    "LoadedPolicy",
    "PolicyIssue",
    "PolicySet",
    "PolicyValidationError",
    "load_policies",
    "load_policy_files",
    "load_policy_text",
    "policy_from_mapping",
]

MAX_FILE_BYTES = 256 * 1024
POLICY_SUFFIXES = (".yaml", ".yml")
WEIGHT_SUM_TOLERANCE = 1e-6


@dataclass(frozen=True)
class PolicyIssue:
    """One problem: ``source`` is the file (``file#N`` for document N of a multi-document file)."""

    source: str
    path: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        prefix = "warning: " if self.severity == "warning" else ""
        return f"{self.source}: {self.path}: {prefix}{self.message}"


@dataclass(frozen=True)
class LoadedPolicy:
    policy: PriorityDerivationPolicy
    source: str


@dataclass
class PolicySet:
    """The result of loading: valid policies, errors and warnings."""

    policies: list[LoadedPolicy] = field(default_factory=list)
    errors: list[PolicyIssue] = field(default_factory=list)
    warnings: list[PolicyIssue] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def by_name(self) -> dict[str, PriorityDerivationPolicy]:
        return {loaded.policy.name: loaded.policy for loaded in self.policies}

    def extend(self, other: PolicySet) -> None:
        self.policies.extend(other.policies)
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)


class PolicyValidationError(ValueError):
    """Raised by :func:`load_policies`; ``issues`` holds every error found."""

    def __init__(self, issues: list[PolicyIssue]) -> None:
        self.issues = issues
        super().__init__("invalid policy set:\n" + "\n".join(str(issue) for issue in issues))


def _kind_of(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def policy_from_mapping(data: Any, source: str) -> tuple[PriorityDerivationPolicy | None, list[PolicyIssue]]:
    """Validate one already-parsed document. Returns the policy, or None and the errors."""
    if not isinstance(data, Mapping):
        return None, [
            PolicyIssue(
                source,
                "(document)",
                f"a policy document must be a mapping (apiVersion, kind, metadata, spec), found {_kind_of(data)}",
            )
        ]
    try:
        return PriorityDerivationPolicy.model_validate(data), []
    except ValidationError as error:
        issues = []
        for detail in error.errors(include_url=False):
            path, message = describe_error(detail)
            issues.append(PolicyIssue(source, path or "(document)", message))
        return None, issues


def _weight_warning(policy: PriorityDerivationPolicy, source: str) -> PolicyIssue | None:
    total = policy.spec.weight_sum
    if total == 0 or math.isclose(total, 1.0, rel_tol=0, abs_tol=WEIGHT_SUM_TOLERANCE):
        return None
    return PolicyIssue(
        source,
        "spec.derivationRules",
        f"weights sum to {total:g}, not 1; they are normalised, so each rule counts weight/{total:g}",
        severity="warning",
    )


def load_policy_text(text: str | bytes, source: str) -> PolicySet:
    """Parse and validate every document of one file's content."""
    result = PolicySet()
    if len(text) > MAX_FILE_BYTES:
        result.errors.append(
            PolicyIssue(source, "(file)", f"file is {len(text)} bytes; at most {MAX_FILE_BYTES} are allowed")
        )
        return result
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            result.errors.append(
                PolicyIssue(source, "(file)", f"not UTF-8 text (byte {error.start}); save the file as UTF-8")
            )
            return result
    try:
        # Imported here: PyYAML is only needed for YAML text, never on the Lambda (JSON) path.
        from osprey_control.policy.safe_yaml import read_documents  # noqa: PLC0415

        documents = read_documents(text)
    except UnsafeYamlError as problem:
        label = source if problem.document <= 1 else f"{source}#{problem.document}"
        result.errors.append(PolicyIssue(label, problem.location, problem.message))
        return result
    if not documents:
        result.errors.append(PolicyIssue(source, "(file)", "no policy document found in the file"))
        return result
    numbered = len(documents) > 1
    for number, data in documents:
        label = f"{source}#{number}" if numbered else source
        policy, errors = policy_from_mapping(data, label)
        result.errors.extend(errors)
        if policy is not None:
            result.policies.append(LoadedPolicy(policy, label))
            warning = _weight_warning(policy, label)
            if warning:
                result.warnings.append(warning)
    return result


def _expand(paths: Iterable[str | Path], result: PolicySet) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        try:
            if path.is_dir():
                found = sorted(p for p in path.iterdir() if p.suffix in POLICY_SUFFIXES and p.is_file())
                if not found:
                    result.errors.append(
                        PolicyIssue(str(path), "(directory)", "no *.yaml or *.yml files found")
                    )
                files.extend(found)
            elif path.is_file():
                files.append(path)
            elif path.exists():
                result.errors.append(PolicyIssue(str(path), "(file)", "not a regular file or directory"))
            else:
                result.errors.append(PolicyIssue(str(path), "(file)", "no such file or directory"))
        except OSError as error:
            result.errors.append(PolicyIssue(str(path), "(file)", f"cannot read: {error.strerror or error}"))
    return files


def _read_capped(path: Path) -> bytes:
    # Read one byte past the cap so an oversized file is detected without loading all of it.
    with path.open("rb") as handle:
        return handle.read(MAX_FILE_BYTES + 1)


def load_policy_files(paths: Iterable[str | Path]) -> PolicySet:
    """Load files and directories (their ``*.yaml`` / ``*.yml``) as one set; names must be unique."""
    result = PolicySet()
    for path in _expand(paths, result):
        try:
            content = _read_capped(path)
        except OSError as error:
            result.errors.append(PolicyIssue(str(path), "(file)", f"cannot read: {error.strerror}"))
            continue
        result.extend(load_policy_text(content, str(path)))

    first_seen: dict[str, str] = {}
    unique: list[LoadedPolicy] = []
    for loaded in result.policies:
        name = loaded.policy.name
        if name in first_seen:
            result.errors.append(
                PolicyIssue(
                    loaded.source,
                    "metadata.name",
                    f"policy name '{name}' is already defined in {first_seen[name]}; names must be unique",
                )
            )
        else:
            first_seen[name] = loaded.source
            unique.append(loaded)
    result.policies = unique
    return result


def load_policies(paths: Iterable[str | Path]) -> list[PriorityDerivationPolicy]:
    """Load a policy set or raise :class:`PolicyValidationError` listing every error."""
    result = load_policy_files(paths)
    if result.errors:
        raise PolicyValidationError(result.errors)
    return [loaded.policy for loaded in result.policies]
