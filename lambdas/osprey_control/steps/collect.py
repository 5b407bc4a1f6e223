"""The collect step of a cycle: one metric collection for every shard, stored for the shards' derive steps.

Collecting per shard would cost ``ceil(series_s / 500)`` GetMetricData calls in each shard, up to one more
call per shard than the fleet's ``ceil(series / 500)`` (and GetMetricData's request rate is a per-account
quota). So the cycle collects once, before its Map: the active jobs of every planned shard, the series their
policies read (on their cadence turn, :mod:`osprey_control.metrics.cadence`), and each shard's part stored
under the lease token (:class:`~osprey_control.registry.collections.CollectionStore`). A shard whose part is
missing (this step failed, or its part was too large to store) reads CloudWatch itself in derive.

After the metrics, two things that need every shard's jobs at once, per pool: the ``reservation`` signal
(:mod:`osprey_control.metrics.reservation`) and then the guard (:mod:`osprey_control.metrics.guard`), which
may replace a pool's metrics by what the order it chose makes the derivation read. A shard that collects for
itself in derive sees only its part of each pool: its jobs get neither that cycle (the policy's order, without
``reservation`` values).

What goes back to the state machine is counts (docs/control-plane.md, Payload); the guard's verdicts go to the
handler, which publishes them as metrics.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from osprey_control.derivation import PolicyLookup
from osprey_control.metrics import (
    CollectionResult,
    PoolVerdict,
    add_guard,
    add_reservations,
    collect,
    encode,
    needs_from_policies,
    split_by,
)
from osprey_control.policy import InvalidPolicy
from osprey_control.registry import JobKey, JobRecord
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.policy_health import invalid_policies, invalid_policy_output

__all__ = ["CollectReport", "ShardedJobs", "SnapshotSink", "collect_for_cycle"]


class ShardedJobs(Protocol):
    def list_active(self, shard: int | None = None) -> list[JobRecord]: ...


class SnapshotSink(Protocol):
    def put(self, shard: int, token: int, body: bytes) -> bool: ...


@dataclass(frozen=True, slots=True)
class CollectReport:
    jobs: int
    series: int
    calls: int
    stored: int  # shards whose part was stored
    too_large: tuple[int, ...]  # shards whose part was not (their derive collects for itself)
    collection_ms: float
    # Deployed policies whose stored value is refused: in the output only when there are some.
    invalid_policies: dict[str, InvalidPolicy] = field(default_factory=dict)
    # Per pool, what the guard did, and its time (for the handler's metrics and log; not in the output).
    guard: tuple[PoolVerdict, ...] = ()
    guard_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "series": self.series,
            "getmetricdata_calls": self.calls,
            "stored": self.stored,
            "tooLarge": len(self.too_large),
            **invalid_policy_output(self.invalid_policies),
        }


def collect_for_cycle(
    registry: ShardedJobs,
    policies: PolicyLookup,
    sink: SnapshotSink,
    *,
    shards: Sequence[int],
    token: int,
    cloudwatch: Any = None,
    now: datetime | None = None,
    deadline: Deadline | None = None,
) -> CollectReport:
    """Collect the metrics of every active job of ``shards`` at once and store each shard's part; the guard
    starts no pool that ``deadline`` (the invocation's and the lease's time; none: no limit) cannot cover."""
    now = now or datetime.now(UTC)
    # Listed shard by shard, so each job's shard is known without hashing its key again.
    part_of: dict[JobKey, int] = {}
    records: list[JobRecord] = []
    for shard in shards:
        listed = registry.list_active(shard)
        part_of.update((record.key, shard) for record in listed)
        records.extend(listed)
    started = time.perf_counter()
    result: CollectionResult = collect(
        records, client=cloudwatch, now=now, needs=needs_from_policies(policies)
    )
    # Over every shard's jobs at once: a pool's reservation needs all of its jobs (metrics/reservation.py).
    add_reservations(records, result, policies, now=now)
    elapsed_ms = (time.perf_counter() - started) * 1000
    # Then the guard, which reads those values (each candidate order is one reservation variant); its time is
    # its own (guard_ms), not the collection's latency.
    guarded = time.perf_counter()
    verdicts = add_guard(
        records, result, policies, now=now, allows=None if deadline is None else deadline.allows
    )
    guard_ms = (time.perf_counter() - guarded) * 1000
    too_large: list[int] = []
    stored = 0
    for shard, part in split_by(result, part_of, shards).items():
        if sink.put(shard, token, encode(part)):
            stored += 1
        else:
            too_large.append(shard)
    return CollectReport(
        len(records),
        result.series,
        result.calls,
        stored,
        tuple(too_large),
        elapsed_ms,
        invalid_policies(policies),
        tuple(verdicts),
        guard_ms,
    )
