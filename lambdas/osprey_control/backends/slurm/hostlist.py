"""Slurm hostlist expressions (``n[1-3,7]``, ``queue1-dy-p4d24xlarge-[1-2]``, ``a[01-02]b[1-2]``) to names."""

from __future__ import annotations

import re

__all__: list[str] = []

_BRACKET = re.compile(r"\[([^\]]*)\]")
_MAX_NAMES = 100_000  # a hostlist bigger than any cluster is an error, not a memory blow-up


def split_top_level(expression: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in expression:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _range(text: str, expression: str) -> list[str]:
    values: list[str] = []
    for item in text.split(","):
        low, dash, high = item.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"invalid hostlist range {item!r} in {expression!r}")
        if not dash:
            values.append(low)
            continue
        width = len(low) if low.startswith("0") else 0
        start, end = int(low), int(high)
        if end < start or end - start > _MAX_NAMES:
            raise ValueError(f"invalid hostlist range {item!r} in {expression!r}")
        values.extend(str(number).zfill(width) for number in range(start, end + 1))
    return values


def expand_hostlist(expression: str | None) -> list[str]:
    """Every host name of ``expression``, in order; ValueError names a malformed part."""
    names: list[str] = []
    for part in split_top_level(expression or ""):
        expanded = [""]
        position = 0
        for match in _BRACKET.finditer(part):
            literal = part[position : match.start()]
            choices = _range(match.group(1), expression or "")
            expanded = [prefix + literal + choice for prefix in expanded for choice in choices]
            if len(expanded) > _MAX_NAMES:
                raise ValueError(f"hostlist {expression!r} names more than {_MAX_NAMES} hosts")
            position = match.end()
        tail = part[position:]
        if "[" in tail or "]" in tail:
            raise ValueError(f"unbalanced brackets in hostlist {expression!r}")
        names.extend(prefix + tail for prefix in expanded)
    return names
