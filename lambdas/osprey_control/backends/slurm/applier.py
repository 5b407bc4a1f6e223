"""Apply Osprey priorities (0..100) to Slurm jobs through slurmrestd (docs/design.md §6, docs/slurm.md).

**Explicit priority, not SiteFactor.** Osprey sets the job's priority itself (``POST /slurm/v0.0.38/job/{id}``
with ``{"priority": N}``), mapped linearly onto :class:`SlurmPriorityRange` (default 1..10001: 100 Slurm points per
Osprey point, ``low + (high - low) * p / 100`` rounded half up; never 0, which Slurm reads as "held"). Why not
SiteFactor, which would keep Slurm's multifactor priority working: the 22.05 REST API does not accept
``site_factor`` (only ``scontrol update jobid=N sitefactor=S`` does, which a Lambda cannot run), and the
control plane's policy already carries what multifactor adds (aging is ``queue_wait``, job size
``requested_gpus``), so one number decided in one place is the simpler contract. The consequences, which
docs/slurm.md spells out: an explicit priority stops Slurm recomputing that job's multifactor priority until
it is held and released; jobs without the Osprey marker keep their multifactor priority, so the range decides
where managed jobs sit relative to them (below, among or above).

Per job: read it (a job slurmctld no longer knows is skipped: permanent); write only a job whose comment still
carries the Osprey marker (``osprey:enabled=true``), and only on the cluster its native id names (``<cluster>/<job
id>``: a record naming another cluster fails, since job ids repeat across clusters). When Slurm already holds the
value (a retried cycle, a concurrent writer, an update whose answer was lost) nothing is written and the job is
applied (:func:`~osprey_control.backends.actuation.already_set`), even if it has ended since; an ended job holding
another value is skipped. A failed update is followed by one more read: when it shows the value, the update
landed (slurmrestd's answer was lost, or a retry was refused) and the job is applied too. Each job's outcome
is its own; one failure never stops the others.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from osprey_control.backends.actuation import (
    ApplyReport,
    ApplyResult,
    Outcome,
    PriorityChange,
    already_set,
    may_have_landed,
    prefilter,
)
from osprey_control.backends.slurm.client import SlurmClient, SlurmRejectedError
from osprey_control.backends.slurm.discovery import job_state, parse_native_id
from osprey_control.backends.slurm.marker import block_from_comment
from osprey_control.errors import is_transient
from osprey_control.policy import PolicySpec
from osprey_control.registry import Backend

__all__ = ["DEFAULT_SLURM_PRIORITY_RANGE", "START_PRIORITY", "SlurmApplier", "SlurmPriorityRange"]

logger = logging.getLogger(__name__)

_SLURM_PRIORITY_MAX = 4_000_000_000  # a uint32 below Slurm's NO_VAL / INFINITE sentinels
# The Osprey priority a new opted-in job starts from before its first derivation: a policy's default
# initialPriority. job_submit.lua (submit_plugin) gives it SlurmPriorityRange.start at submission.
START_PRIORITY: int = PolicySpec.model_fields["initial_priority"].default
_OVER = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE",
     "PREEMPTED", "REVOKED"}
)  # fmt: skip


@dataclass(frozen=True)
class SlurmPriorityRange:
    """The Slurm priorities Osprey's 0..100 maps onto (module docstring)."""

    low: int = 1
    high: int = 10_001

    def __post_init__(self) -> None:
        if not 1 <= self.low < self.high <= _SLURM_PRIORITY_MAX:
            raise ValueError(
                f"Slurm priority range must satisfy 1 <= low < high <= {_SLURM_PRIORITY_MAX} "
                f"(0 means held), got {self.low}..{self.high}"
            )

    @classmethod
    def parse(cls, text: str) -> SlurmPriorityRange:
        """``LOW..HIGH`` (the ``OSPREY_SLURM_PRIORITY_RANGE`` form)."""
        low, separator, high = text.partition("..")
        if not separator or not low.strip().isdigit() or not high.strip().isdigit():
            raise ValueError(f"a Slurm priority range is LOW..HIGH (integers, e.g. 1..10001), got {text!r}")
        return cls(int(low), int(high))

    def map(self, priority: int) -> int:
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 100:
            raise ValueError(f"Osprey priority must be an integer 0..100, got {priority!r}")
        return self.low + (priority * (self.high - self.low) * 2 + 100) // 200

    @property
    def start(self) -> int:
        """Where a new opted-in job starts at submission (``job_submit.lua``, docs/slurm.md): the mapping of
        :data:`START_PRIORITY`, the middle of the range (5001 of 1..10001)."""
        return self.map(START_PRIORITY)


DEFAULT_SLURM_PRIORITY_RANGE = SlurmPriorityRange()


class SlurmApplier:
    """The :class:`~osprey_control.backends.Applier` for ``slurm`` jobs; ``connect(cluster)`` gives the cluster's
    :class:`SlurmClient` (one per cluster and call). An unreachable cluster fails only its own jobs."""

    backends = frozenset({Backend.SLURM})
    chunk_size = 50  # one GET and at most one POST per job, a few milliseconds each

    def __init__(
        self,
        connect: Callable[[str], SlurmClient],
        *,
        priority_range: SlurmPriorityRange = DEFAULT_SLURM_PRIORITY_RANGE,
    ) -> None:
        self._connect = connect
        self.priority_range = priority_range

    def apply(self, changes: Sequence[PriorityChange]) -> ApplyReport:
        todo, results = prefilter(changes, self.backends)
        report = ApplyReport(results)
        by_cluster: dict[str, list[tuple[PriorityChange, int]]] = defaultdict(list)
        for change in todo:
            try:
                cluster, job_id = parse_native_id(change.record.native_id)
            except ValueError as error:
                report.results.append(
                    ApplyResult(change.record.key, Outcome.FAILED, change.priority, str(error))
                )
                continue
            if change.record.cluster and change.record.cluster != cluster:
                # Job ids are per cluster: writing this id on the record's other cluster would move its job there.
                reason = (
                    f"the record names cluster {change.record.cluster} but its job id is cluster {cluster}'s; "
                    "Osprey writes a Slurm job only on the cluster whose discovery recorded it"
                )
                report.results.append(ApplyResult(change.record.key, Outcome.FAILED, change.priority, reason))
                continue
            by_cluster[cluster].append((change, job_id))
        for cluster, batch in by_cluster.items():
            try:
                client = self._connect(cluster)
            except Exception as error:  # no secret, no endpoint: this cluster's jobs only
                reason = f"cluster {cluster}: {type(error).__name__}: {error}"
                transient = is_transient(error)
                report.results.extend(
                    ApplyResult(
                        change.record.key, Outcome.FAILED, change.priority, reason, transient=transient
                    )
                    for change, _ in batch
                )
                continue
            for change, job_id in batch:
                result = self._apply_one(client, change, job_id)
                if result.outcome is Outcome.APPLIED and result.reason == "updated":
                    report.writes += 1
                if result.outcome is Outcome.FAILED:
                    logger.warning(
                        "slurm priority not applied",
                        extra={"cluster": cluster, "job": job_id, "reason": result.reason},
                    )
                report.results.append(result)
        return report

    def _apply_one(self, client: SlurmClient, change: PriorityChange, job_id: int) -> ApplyResult:
        key, priority = change.record.key, change.priority
        value = self.priority_range.map(priority)
        try:
            job = client.job(job_id)
            if job is None:
                return ApplyResult(key, Outcome.SKIPPED, priority, "slurmctld no longer knows the job")
            if block_from_comment(str(job.get("comment") or "")) is None:
                return ApplyResult(
                    key, Outcome.SKIPPED, priority,
                    "the job's comment no longer carries the Osprey marker: Osprey never writes unmanaged jobs",
                )  # fmt: skip
            if job.get("priority") == value:  # in force, whoever set it: applied, even on an ended job
                return already_set(key, priority, str(value))
            state = job_state(job)
            if state in _OVER:
                return ApplyResult(key, Outcome.SKIPPED, priority, f"job has ended ({state})")
        except Exception as error:
            return _failed(change, error)
        try:
            client.update_job(job_id, {"priority": value})
        except Exception as error:
            confirmed = self._confirm(client, change, job_id, value) if may_have_landed(error) else None
            return confirmed or _failed(change, error)
        return ApplyResult(key, Outcome.APPLIED, priority, "updated", native_value=str(value))

    @staticmethod
    def _confirm(client: SlurmClient, change: PriorityChange, job_id: int, value: int) -> ApplyResult | None:
        """After a failed update: :func:`already_set` when a new read shows ``value`` (the update landed and
        its answer was lost, or a concurrent writer set the same value), else None (the failure stands)."""
        try:
            job = client.job(job_id)
        except Exception:  # the first failure is the one reported
            return None
        if job is None or job.get("priority") != value:
            return None
        how = "the update failed, yet a new read shows the value"
        return already_set(change.record.key, change.priority, str(value), how=how)


def _failed(change: PriorityChange, error: Exception) -> ApplyResult:
    key, priority = change.record.key, change.priority
    if isinstance(error, SlurmRejectedError):
        if error.job_gone:
            return ApplyResult(key, Outcome.SKIPPED, priority, f"job has ended: {error}")
        return ApplyResult(key, Outcome.FAILED, priority, str(error))
    # Classified by the client; anything else is a bug, recorded as permanent.
    reason = f"{type(error).__name__}: {error}"
    return ApplyResult(key, Outcome.FAILED, priority, reason, transient=is_transient(error))
