"""Trying a policy on real history before rolling it out (``osprey policy replay``).

For every active job whose policy has the new policy's name (or another policy's, ``jobs_of``), the decisions
the registry recorded in the window (each with the inputs it was derived from,
:mod:`osprey_control.derivation.replay`) are derived again under the new policy, in order, each from the previous replayed priority. A job with no decision in the window replays its
last one. The result per job is its priority now and under the new policy, and every active job's rank (1 =
highest priority) before and after; jobs of other policies keep their priority and may move only because the
replayed jobs move past them.

The registry records a decision when it changes something (a new priority or reason), not every cycle: the replay
re-derives those moments, which is where a different policy would have decided differently from the same data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from osprey_control.derivation import ReplayedDecision, compile_policy, replay_job
from osprey_control.policy import PriorityDerivationPolicy
from osprey_control.registry import JobKey, JobRecord, JobRegistry

__all__ = ["JobReplay", "replay_policy"]


@dataclass
class JobReplay:
    record: JobRecord
    steps: list[ReplayedDecision] = field(default_factory=list)
    old_priority: int = 0
    new_priority: int = 0
    old_rank: int = 0
    new_rank: int = 0

    @property
    def replayable(self) -> bool:
        return bool(self.steps) and all(step.replayable for step in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": str(self.record.key),
            "name": self.record.name,
            "policy": self.record.policy,
            "old_priority": self.old_priority,
            "new_priority": self.new_priority,
            "old_rank": self.old_rank,
            "new_rank": self.new_rank,
            "replayable": self.replayable,
            "decisions": [
                {
                    "recorded_at": step.recorded_at,
                    "old": step.old_priority,
                    "new": step.new_priority,
                    "reason": step.new.reason,
                    "target": step.new.target,
                    "replayed": step.replayable,
                }
                for step in self.steps
            ],
        }


def _history(registry: JobRegistry, record: JobRecord, since: datetime) -> list[dict[str, Any]]:
    found = registry.events.decisions(record.key, since=since, newest_first=False)
    if found or not record.last_decision:
        return found
    return [
        {"recorded_at": "", "derived_priority": record.derived_priority, "decision": record.last_decision}
    ]


def _ranks(priorities: dict[JobKey, int]) -> dict[JobKey, int]:
    ordered = sorted(priorities, key=lambda key: (-priorities[key], str(key)))
    return {key: index + 1 for index, key in enumerate(ordered)}


def replay_policy(
    policy: PriorityDerivationPolicy,
    registry: JobRegistry,
    since: datetime,
    records: Sequence[JobRecord] | None = None,
    *,
    jobs_of: str | None = None,
) -> list[JobReplay]:
    """The replay of every active job of ``policy.name``, or of the policy named ``jobs_of`` (a new policy
    tried on an existing one's jobs: ``osprey policy replay --as``); ``records``: the active jobs, read when
    None. Highest new priority first."""
    active = list(records) if records is not None else registry.list_active()
    compiled = compile_policy(policy)
    replays: dict[JobKey, JobReplay] = {}
    for record in active:
        if record.policy != (jobs_of or policy.name):
            continue
        steps = replay_job(compiled, str(record.key), _history(registry, record, since))
        current = (
            record.derived_priority if record.derived_priority is not None else policy.spec.initial_priority
        )
        new = steps[-1].new_priority if steps else current
        replays[record.key] = JobReplay(record, steps, current, new)
    before = {
        record.key: record.derived_priority if record.derived_priority is not None else 0 for record in active
    }
    after = {**before, **{key: replay.new_priority for key, replay in replays.items()}}
    old_ranks, new_ranks = _ranks(before), _ranks(after)
    for key, replay in replays.items():
        replay.old_rank, replay.new_rank = old_ranks[key], new_ranks[key]
    return sorted(replays.values(), key=lambda replay: (replay.new_rank, str(replay.record.key)))
