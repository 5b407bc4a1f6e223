"""Backend writes that may have landed after the lease changed hands: what the apply step records before each
applier call, and how it repairs the writes of an execution that could not say they were over.

The guarantee (docs/control-plane.md, Fencing): a backend write starts only if every attempt botocore may make
ends before the lease expires (:class:`~osprey_control.steps.deadline.Deadline`), and no other execution takes
the lease before it expires. What remains is a request the service carries out after the client stopped
waiting for it. So the apply step records a :class:`~osprey_control.registry.WriteIntent` before each call
(fenced) and deletes it once the call returned (fenced too: an execution that lost the lease cannot). An intent
found at the start of an apply step is *in doubt*: its writes may land, or have landed, over a newer
execution's. Its jobs are written again with what the registry says the backend holds (``applied_priority``),
even though the registry says they are applied: the appliers read the backend first, so a job whose value is
in place costs a read, and Batch rewrites a scheduling policy only when a weight differs. The intent is deleted
by the first repair that starts after its ``until`` (no request of it can land any more) and succeeds for
every job it covers; until then every cycle repairs it again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from osprey_control.backends import ApplyReport, Outcome, PriorityChange
from osprey_control.registry import (
    MAX_INTENT_KEYS,
    Backend,
    JobKey,
    JobRecord,
    WriteIntent,
)
from osprey_control.steps.deadline import Deadline

__all__ = ["IN_DOUBT_SLACK_S", "IntentSource", "intent_for", "repair_changes", "resolved"]

# How long after its client gave up a request may still be carried out. AWS refuses a SigV4 request that
# arrives more than 5 minutes after it was signed; the Kubernetes and Slurm APIs have no such rule, and 5 minutes
# is far beyond their servers' request timeouts (60 s for the Kubernetes API server).
IN_DOUBT_SLACK_S = 300
# An intent of a call without a deadline (unbounded: tests, a direct run) is in doubt this long.
_UNBOUNDED_CALL_S = 900


class IntentSource(Protocol):
    """The registry as the repair reads it (:class:`osprey_control.registry.dynamodb.JobRegistry`)."""

    def get(self, key: JobKey) -> JobRecord | None: ...


@runtime_checkable
class ActiveListing(Protocol):
    """A registry that lists a backend's active jobs, for an intent that names none (Batch's whole call)."""

    def list_active(self, shard: int | None = None, *, backend: Backend | None = None) -> list[JobRecord]: ...


def intent_for(
    token: int,
    call: int,
    *,
    backends: Iterable[Backend],
    keys: Sequence[JobKey] | None,
    deadline: Deadline,
    now: datetime,
) -> WriteIntent:
    """The intent of one applier call starting at ``now`` to ``keys`` (None: any job of ``backends``): its
    requests end (client side) before the deadline, which is the lease's expiry at the latest, and are carried
    out :data:`IN_DOUBT_SLACK_S` after that at most."""
    left_s = deadline.remaining_ms() / 1000.0
    left_s = _UNBOUNDED_CALL_S if not math.isfinite(left_s) else max(0.0, left_s)
    until = math.ceil(now.timestamp() + left_s) + IN_DOUBT_SLACK_S
    named = tuple(keys) if keys is not None and len(keys) <= MAX_INTENT_KEYS else None
    return WriteIntent(token, call, tuple(sorted(set(backends))), named, until)


def repair_changes(
    intents: Iterable[WriteIntent], registry: IntentSource, pending: Iterable[JobKey]
) -> list[PriorityChange]:
    """For the jobs the ``intents`` cover that are not ``pending`` (those are written anyway): their
    ``applied_priority`` again, as a change the appliers cannot take for "unchanged"."""
    skip = set(pending)
    records: dict[JobKey, JobRecord] = {}
    for intent in intents:
        if intent.keys is None:
            if not isinstance(registry, ActiveListing):
                raise TypeError("an intent for every job of a backend needs a registry with list_active")
            for backend in intent.backends:
                records.update((record.key, record) for record in registry.list_active(backend=backend))
            continue
        for key in intent.keys:
            if key not in records and key not in skip:
                record = registry.get(key)
                if record is not None:
                    records[key] = record
    changes: list[PriorityChange] = []
    for key, record in records.items():
        if key in skip or not record.active or record.applied_priority is None:
            continue
        # applied_priority None makes the applier write (or find in place) rather than skip it as unchanged.
        forced = record.model_copy(update={"applied_priority": None})
        changes.append(PriorityChange(forced, record.applied_priority))
    return changes


def resolved(intent: WriteIntent, report: ApplyReport, records: dict[JobKey, Backend], now: datetime) -> bool:
    """Whether ``intent`` may be deleted: its window is over (``until`` before ``now``), this apply step still
    holds the lease, and every job of it that this step wrote or repaired (``records``: key → backend) is on
    its backend now (applied or skipped, not failed, deferred or unrecorded)."""
    if report.fence_lost or now.timestamp() < intent.until:
        return False
    open_keys = set(report.deferred) | {key for key, _ in report.unrecorded}
    open_keys |= {result.job for result in report.results if result.outcome is Outcome.FAILED}
    return not any(intent.covers(key, backend) for key, backend in records.items() if key in open_keys)
