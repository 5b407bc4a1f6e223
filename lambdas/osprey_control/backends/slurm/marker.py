"""The Slurm-native marker: Osprey's tags in the job's ``comment``.

slurmrestd's job listing (``GET /slurm/v0.0.38/jobs``) does not return a job's environment, so the control
plane cannot see the ``OSPREY_*`` variables a job was submitted with. It sees the ``comment`` (``sbatch
--comment``, ``#SBATCH --comment=``, the REST ``comment`` field). Osprey writes the block there in its tag form,
comma-separated, with no spaces (so an ``#SBATCH`` line needs no quoting)::

    osprey:enabled=true,osprey:policy=training-policy,osprey:co-schedule=true,osprey:gang-timeout=180

Reading tolerates other text around the marker (a user's own comment is kept): tokens are split on commas,
semicolons and whitespace, and only ``osprey:*`` tokens (or ``OSPREY_*=`` ones, the environment form) are
read. ``osprey slurm annotate`` and :func:`osprey.slurm.annotate_submission` write it from the ``OSPREY_*``
lines a script already has (docs/slurm.md).
"""

from __future__ import annotations

import re

from osprey_control.contract import (
    ENABLED_ENV,
    ENABLED_TAG,
    OspreyBlock,
    from_environment,
    from_tags,
    to_tags,
)

__all__ = ["block_from_comment", "comment_with_marker", "marker"]

MARKER_PREFIX = "osprey:"
_SEPARATORS = re.compile(r"[,;\s]+")


def marker(block: OspreyBlock) -> str:
    """The marker for ``block``: its tags joined by commas (enabled first)."""
    return ",".join(f"{key}={value}" for key, value in to_tags(block).items())


def marker_fields(comment: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """``(tags, environment)``: the ``osprey:*`` and ``OSPREY_*`` tokens of a comment."""
    tags: dict[str, str] = {}
    environment: dict[str, str] = {}
    for token in _SEPARATORS.split(comment or ""):
        key, separator, value = token.partition("=")
        if not separator:
            continue
        if key.startswith(MARKER_PREFIX):
            tags[key] = value
        elif key.startswith("OSPREY_"):
            environment[key] = value
    return tags, environment


def block_from_comment(comment: str | None, *, strict: bool = False) -> OspreyBlock | None:
    """The block a job's comment carries, None when it has not opted in; OspreyBlockError when it opted in with
    an invalid value (naming the key). The tag form wins when both forms are present."""
    tags, environment = marker_fields(comment)
    if ENABLED_TAG in tags:
        return from_tags(tags, strict=strict)
    if ENABLED_ENV in environment:
        return from_environment(environment, strict=strict)
    return None


def comment_with_marker(existing: str | None, block: OspreyBlock) -> str:
    """``existing`` with its Osprey tokens replaced by ``block``'s marker; the rest of the text is kept."""
    kept = [
        token
        for token in re.split(r"([,;\s]+)", existing or "")
        if not token.startswith((MARKER_PREFIX, "OSPREY_"))
    ]
    rest = "".join(kept).strip(",; \t\n")
    rest = re.sub(r"([,;\s])[,;\s]+", r"\1", rest)
    return marker(block) if not rest else f"{marker(block)},{rest}"
