"""Team fair share under Osprey on AWS Batch: Osprey-owned share identifiers per team and job size, and the
weights that keep each team's share while Osprey orders the team's jobs (docs/metrics-and-actuation.md).

Why not one share identifier per job: AWS Batch "tracks usage for each share identifier by using the
(T * weightFactor) formula, where T is the vCPU usage over time" and "picks jobs with the lowest usage" (AWS
Batch User Guide, "Use share identifiers to identify workloads"). A queued job alone in its share has no
usage, and 0 x any ``weightFactor`` is 0: every queued job ties, no weight orders them, and the team's own
share, whose usage is what kept the team to its entitlement, is gone. A weight acts only on a share that has
usage, so a team's jobs must share identifiers with its running jobs.

Why not the team's own single share: within a share Batch starts jobs by ``schedulingPriority``, fixed at
``SubmitJob`` for a container job (there is no update call), and a job at the head of the queue that cannot
be placed blocks the jobs behind it (AWS Batch User Guide, "Jobs stuck in a RUNNABLE status"). A team's one
share then waits behind its largest job.

So each team gets a few identifiers of Osprey's own, one per *size class* of job
(:func:`team_share_identifier`, ``osprey-<team>-g<class>``): a large job at the head blocks only its class.
Every cycle Osprey computes each such share's usage from the registry's allocation history, decayed with the
queue's ``shareDecaySeconds`` (:func:`decayed_usage`), and writes (:func:`fold_weights`)

    weightFactor(team, class) = W_team x U_team / U_(team, class) x h(p)

so that Batch's ``U_(team, class) x weightFactor`` is ``W_team x U_team x h(p)`` for every class of the team:
Batch picks the team with the least weighted usage, as it did with one share per team (``W_team`` is the
weight of the team's own entry, which Osprey reads but never changes; 1.0 without one), and among that
team's classes the one whose best queued job has the highest Osprey priority ``p`` (``h`` from 1 at
priority 100 to ``1 + order_margin`` at 0: within a team, by Osprey's order; between teams, usage first).
Pure: no AWS call, no clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from osprey_control.derivation import AllocationInterval

__all__ = [
    "DEFAULT_ORDER_MARGIN",
    "SIZE_CLASS_LIMITS",
    "TeamShare",
    "TeamShareState",
    "decayed_usage",
    "fold_weights",
    "parse_team_share",
    "size_class",
    "team_share_identifier",
]

# Upper bounds (GPUs) of the size classes; a job above the last is in class len(limits). Measured on the
# simulator's workloads (docs/metrics-and-actuation.md): part of a node, one or two nodes, up to 16 nodes, more.
SIZE_CLASS_LIMITS: tuple[int, ...] = (4, 16, 128)
# Between two classes of one team, the priority term moves the weight by at most this fraction: small enough
# that a team with more usage than another does not get ahead of it by Osprey's order.
DEFAULT_ORDER_MARGIN = 0.1
PREFIX = "osprey-"
# Batch accepts weightFactor 0.0001..999.9999 with 4 decimals (botocore model, ShareAttributes).
_MIN_WEIGHT = 0.0001
_MAX_WEIGHT = 999.9999
# Share identifiers: up to 255 letters and digits (the API also allows '-' and '_'), no trailing '*'.
_TEAM = re.compile(r"^[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*$")
_SHARE = re.compile(r"^osprey-(?P<team>.+)-g(?P<size>[0-9]+)$")
_MAX_SHARE = 255


@dataclass(frozen=True, slots=True)
class TeamShare:
    """An Osprey-owned share identifier: ``team``'s jobs of size class ``size``."""

    team: str
    size: int

    @property
    def identifier(self) -> str:
        return f"{PREFIX}{self.team}-g{self.size}"


def size_class(gpus: int, limits: Sequence[int] = SIZE_CLASS_LIMITS) -> int:
    """The size class of a job of ``gpus`` GPUs: the index of the first limit it does not exceed."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus must be a positive integer, got {gpus!r}")
    for index, limit in enumerate(limits):
        if gpus <= limit:
            return index
    return len(limits)


def team_share_identifier(team: str, gpus: int, limits: Sequence[int] = SIZE_CLASS_LIMITS) -> str:
    """The share identifier a ``team``'s job of ``gpus`` GPUs is submitted with (``osprey-<team>-g<class>``)."""
    if not isinstance(team, str) or not _TEAM.match(team):
        raise ValueError(
            f"team must be letters, digits and '_', joined by single '-', got {team!r} "
            "(it becomes part of an AWS Batch share identifier)"
        )
    identifier = TeamShare(team, size_class(gpus, limits)).identifier
    if len(identifier) > _MAX_SHARE:
        raise ValueError(
            f"team {team[:40]!r}... is too long: the share identifier exceeds {_MAX_SHARE} characters"
        )
    return identifier


def parse_team_share(share: str) -> TeamShare | None:
    """The team and size class of an Osprey-owned share identifier; None for any other identifier."""
    match = _SHARE.match(share)
    if match is None or not _TEAM.match(match["team"]):
        return None
    return TeamShare(match["team"], int(match["size"]))


def decayed_usage(intervals: Iterable[AllocationInterval], now_s: float, decay_s: float) -> float:
    """GPUs held, averaged with an exponential decay of ``decay_s`` seconds up to ``now_s``.

    ``sum(gpus x (e^-(now-end)/D - e^-(now-start)/D))``: an interval held for long enough counts its GPUs, one
    that ended D seconds ago counts e^-1 of them. With ``decay_s`` 0 only what is held now counts (Batch:
    "only current usage is measured"). Only ratios of usages enter the weights, so Batch's vCPU-seconds and
    these GPU-seconds agree wherever a job's vCPUs are proportional to its GPUs.
    """
    usage = 0.0
    for interval in intervals:
        end = now_s if interval.end_s is None else min(interval.end_s, now_s)
        if end <= interval.start_s:
            continue
        if decay_s <= 0:
            usage += interval.gpus if interval.end_s is None else 0.0
            continue
        usage += interval.gpus * (
            math.exp(-(now_s - end) / decay_s) - math.exp(-(now_s - interval.start_s) / decay_s)
        )
    return usage


@dataclass(frozen=True, slots=True)
class TeamShareState:
    """What the weights need of one Osprey-owned share: its decayed usage, and the highest applied Osprey
    priority among its queued jobs (None when none is queued)."""

    share: TeamShare
    usage: float
    best_queued_priority: int | None = None


def _batch_weight(value: float) -> float:
    return round(min(_MAX_WEIGHT, max(_MIN_WEIGHT, value)), 4)


def fold_weights(
    states: Iterable[TeamShareState],
    team_weights: Mapping[str, float] | None = None,
    *,
    order_margin: float = DEFAULT_ORDER_MARGIN,
) -> dict[str, float]:
    """``weightFactor`` per share identifier (module docstring): the team's usage folded in, so Batch's
    ``usage x weightFactor`` is the team's weighted usage for every class, times the priority term.

    A share without usage gets ``W_team x h(p)``: Batch sees 0 for it whatever the weight (it starts its head
    at once, as it would a team's first job). A team without a weight in ``team_weights`` has 1.0.
    """
    if not 0 <= order_margin <= 1:
        raise ValueError(f"order_margin must be within 0..1, got {order_margin!r}")
    chosen = list(states)
    team_usage: dict[str, float] = {}
    for state in chosen:
        if state.usage < 0 or not math.isfinite(state.usage):
            raise ValueError(
                f"usage of {state.share.identifier} must be a finite number >= 0, got {state.usage!r}"
            )
        team_usage[state.share.team] = team_usage.get(state.share.team, 0.0) + state.usage
    weights: dict[str, float] = {}
    for state in chosen:
        base = (team_weights or {}).get(state.share.team, 1.0)
        priority = 50 if state.best_queued_priority is None else state.best_queued_priority
        order = 1.0 + order_margin * (100 - min(100, max(0, priority))) / 100
        total = team_usage[state.share.team]
        fold = total / state.usage if state.usage > 0 and total > 0 else 1.0
        weights[state.share.identifier] = _batch_weight(base * fold * order)
    return weights
