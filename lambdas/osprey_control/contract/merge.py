"""Merge an ``osprey`` block with the environment variables and tags the user already set.

Rule (issue 3): a user value that contradicts the block is an error, never a silent override. A user value
for a key the block leaves unset is kept and becomes part of the effective block, so the environment and
the tags that are finally written always describe the same job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from osprey_control.contract.forms import (
    ENVIRONMENT,
    TAGS,
    Form,
    read_fields,
    to_environment,
    to_tags,
)
from osprey_control.contract.model import (
    OspreyBlock,
    OspreyBlockError,
    describe_validation_error,
)

__all__ = ["Source", "merge_block", "merge_environment", "merge_tags"]

# (form, the user's values, where they came from: "environment", "tags", "metadata.labels", ...)
Source = tuple[Form, Mapping[str, str], str]


def _shown(value: Any) -> str:
    return "true" if value is True else "false" if value is False else repr(value)


def merge_block(block: OspreyBlock, *sources: Source, path: str = "osprey") -> OspreyBlock:
    """The effective block: ``block`` plus the contract values found in ``sources``.

    Raises :class:`OspreyBlockError` when a source disables Osprey, holds an invalid value, or contradicts
    the block or another source; each problem names both sides.
    """
    problems: list[tuple[str, str]] = []
    fields: dict[str, Any] = block.model_dump(exclude_none=True)
    origin: dict[str, str] = {name: f"{path}.{name}" for name in fields}
    for form, values, where in sources:
        enabled, found, issues = read_fields(form, values, strict=True)
        problems.extend((f"{where} {key}", message) for key, message in issues)
        if enabled is False:
            problems.append(
                (
                    f"{where} {form.enabled_key}",
                    f"{values[form.enabled_key]!r} contradicts the osprey block, which opts the job in; "
                    f"remove it or set {form.enabled_key}={form.enabled_value}",
                )
            )
        for name, value in found.items():
            key = f"{where} {form.key(name)}"
            if name not in fields:
                fields[name] = value
                origin[name] = key
            elif fields[name] != value:
                problems.append(
                    (key, f"{_shown(value)} contradicts {origin[name]}={_shown(fields[name])}; remove one")
                )
    if problems:
        raise OspreyBlockError(problems)
    try:
        return OspreyBlock.model_validate(fields)
    except ValidationError as error:
        raise OspreyBlockError(
            describe_validation_error(error, lambda name: origin.get(name, name))
        ) from None


def merge_environment(block: OspreyBlock, environment: Mapping[str, str] | None) -> dict[str, str]:
    """``environment`` plus the block's ``OSPREY_*`` variables (call :func:`merge_block` first)."""
    effective = merge_block(block, (ENVIRONMENT, environment or {}, "environment"))
    return {**(environment or {}), **to_environment(effective)}


def merge_tags(block: OspreyBlock, tags: Mapping[str, str] | None) -> dict[str, str]:
    """``tags`` plus the block's ``osprey:*`` tags (call :func:`merge_block` first)."""
    effective = merge_block(block, (TAGS, tags or {}, "tags"))
    return {**(tags or {}), **to_tags(effective)}
