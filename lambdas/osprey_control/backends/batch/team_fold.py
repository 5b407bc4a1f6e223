"""From the registry's records of a scheduling policy's team-share jobs to the weights Osprey writes for their
shares: each share's decayed GPU usage and best queued priority, folded by :func:`.team_shares.fold_weights`,
the function the simulator's ``fairshare+osprey`` calls too. Pure: no AWS call, no clock.

What a share's usage counts: the allocation intervals of the share's *active* jobs in the registry (the ones
the cycle lists), decayed with the policy's ``shareDecaySeconds``. A finished job leaves the registry's active
listing, so its decaying usage is no longer counted (docs/decisions.md, "Batch team shares written by the
applier"); history folded after :data:`~osprey_control.registry.allocation.MAX_MARKS` marks (some 30 attempts)
has no dates left to decay and is not counted either.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osprey_control.backends.batch.team_shares import (
    TeamShare,
    TeamShareState,
    decayed_usage,
    fold_weights,
    parse_team_share,
)
from osprey_control.registry import JobRecord, JobStatus

__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class Member:
    """One active job of an Osprey team share: its record and the Osprey priority in force for it (this cycle's
    when the cycle applies one, else the applied one)."""

    share: TeamShare
    record: JobRecord
    priority: int | None


def share_of(record: JobRecord) -> str | None:
    """The share identifier a job was submitted with (the event's, else its block's)."""
    return record.share_identifier or record.block.share_identifier


def team_member(record: JobRecord, priority: int | None = None) -> Member | None:
    """``record`` as a member of its Osprey team share; None when its share is not one."""
    share = share_of(record)
    owned = parse_team_share(share) if share else None
    if owned is None:
        return None
    return Member(owned, record, record.applied_priority if priority is None else priority)


def share_states(members: Iterable[Member], now_s: float, decay_s: float) -> list[TeamShareState]:
    """Per share: the decayed usage of its jobs and the highest priority among its queued (PENDING) jobs."""
    usage: dict[TeamShare, list[float]] = {}
    best: dict[TeamShare, int | None] = {}
    for member in members:
        usage.setdefault(member.share, []).append(
            decayed_usage(member.record.allocation_intervals(), now_s, decay_s)
        )
        best.setdefault(member.share, None)
        if member.record.status is JobStatus.PENDING and member.priority is not None:
            current = best[member.share]
            best[member.share] = member.priority if current is None else max(current, member.priority)
    return [TeamShareState(share, math.fsum(parts), best[share]) for share, parts in usage.items()]


def team_entry_weights(distribution: Sequence[Mapping[str, Any]], teams: Iterable[str]) -> dict[str, float]:
    """The ``weightFactor`` of each team's own entry (shareIdentifier equal to the team's name), where the policy
    has one: read, never changed. A team without an entry is left out (weight 1.0 in the fold, as in Batch)."""
    wanted = set(teams)
    weights: dict[str, float] = {}
    for entry in distribution:
        identifier = str(entry.get("shareIdentifier", ""))
        weight = entry.get("weightFactor")
        if identifier in wanted and isinstance(weight, int | float) and not isinstance(weight, bool):
            weights[identifier] = float(weight)
    return weights


def decay_seconds(fairshare: Mapping[str, Any]) -> float:
    """The policy's ``shareDecaySeconds`` (absent: 0, Batch's default: only current usage counts)."""
    value = fairshare.get("shareDecaySeconds", 0)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def policy_team_weights(
    members: Sequence[Member], fairshare: Mapping[str, Any], now_s: float
) -> dict[str, float]:
    """The ``weightFactor`` of every team share with a member, for the policy whose ``fairsharePolicy`` is
    ``fairshare`` (its decay and its teams' own entries), at ``now_s``."""
    if not members:
        return {}
    states = share_states(members, now_s, decay_seconds(fairshare))
    distribution = list(fairshare.get("shareDistribution") or ())
    teams = team_entry_weights(distribution, (state.share.team for state in states))
    return fold_weights(states, teams)
