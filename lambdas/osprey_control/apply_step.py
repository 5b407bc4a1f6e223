"""The apply step of a cycle: the changes of every shard, routed to each backend's applier at once.

It runs after the shards' Map state so that Batch gets one UpdateSchedulingPolicy per queue per cycle. The
registry already holds the new priority (the derive step recorded it), so each change is applied against the
``previous`` priority its shard reported: that is the value in force on the backend.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from osprey_control.apply import (
    Applier,
    ApplyReport,
    ApplyResult,
    BatchShareApplier,
    Outcome,
    PriorityChange,
    ServiceJobApplier,
    TrainingJobTagApplier,
    apply_all,
    prefilter,
)
from osprey_control.registry import Backend, JobKey, JobRecord

__all__ = ["EksApplier", "RecordSource", "apply_cycle", "changes_from_reports", "default_appliers"]


class RecordSource(Protocol):
    def get(self, key: JobKey) -> JobRecord | None: ...


def _key(text: str) -> JobKey:
    backend, _, native_id = text.partition("#")
    return JobKey(Backend(backend), native_id)


def changes_from_reports(
    reports: Iterable[Mapping[str, Any]], registry: RecordSource
) -> tuple[list[PriorityChange], list[ApplyResult]]:
    """The shards' reported changes as :class:`PriorityChange`, each against the priority it replaces."""
    changes: list[PriorityChange] = []
    missing: list[ApplyResult] = []
    for report in reports:
        for change in report.get("changes", []):
            key = _key(change["key"])
            record = registry.get(key)
            if record is None:  # deleted between derive and apply: nothing to write
                missing.append(ApplyResult(key, Outcome.SKIPPED, change["priority"], "job left the registry"))
                continue
            previous = record.model_copy(update={"applied_priority": change["previous"]})
            changes.append(PriorityChange(previous, int(change["priority"])))
    return changes, missing


class EksApplier:
    """The :class:`Applier` protocol over :class:`osprey_control.eks.EksPriorityApplier`, one per cluster.

    ``connect`` builds a Kubernetes client for a cluster name (default: EKS DescribeCluster + IAM token); a
    cluster that cannot be reached fails only its own jobs.
    """

    backends = frozenset({Backend.EKS})

    def __init__(self, connect: Callable[[str], Any] | None = None) -> None:
        self._connect = connect

    def apply(self, changes: Sequence[PriorityChange]) -> ApplyReport:
        from osprey_control.eks import connect as eks_connect  # noqa: PLC0415 - only clusters with EKS jobs
        from osprey_control.eks.applier import ApplyOutcome, EksPriorityApplier, PriorityTarget  # noqa: PLC0415

        # The same unchanged/invalid rules as the AWS appliers, then per cluster.
        todo, results = prefilter(changes, self.backends)
        report = ApplyReport(results)
        by_cluster: dict[str, list[PriorityChange]] = defaultdict(list)
        for change in todo:
            if change.record.cluster is None:
                report.results.append(
                    ApplyResult(
                        change.record.key, Outcome.FAILED, change.priority, "EKS job without a cluster"
                    )
                )
                continue
            by_cluster[change.record.cluster].append(change)
        outcomes = {ApplyOutcome.APPLIED: Outcome.APPLIED, ApplyOutcome.SKIPPED: Outcome.SKIPPED}
        for cluster, batch in by_cluster.items():
            keys = {change.record.native_id: change.record.key for change in batch}
            try:
                client = (self._connect or eks_connect)(cluster)
                eks_report = EksPriorityApplier(client, cluster).apply(
                    PriorityTarget.from_record(change.record, change.priority) for change in batch
                )
            except Exception as error:  # an unreachable cluster fails its own jobs only
                reason = f"cluster {cluster}: {type(error).__name__}: {error}"
                report.results.extend(
                    ApplyResult(c.record.key, Outcome.FAILED, c.priority, reason) for c in batch
                )
                continue
            for result in eks_report.results:
                outcome = outcomes.get(result.outcome, Outcome.FAILED)
                report.results.append(
                    ApplyResult(
                        keys[result.native_id],
                        outcome,
                        result.priority,
                        result.reason,
                        native_value=None
                        if result.kubernetes_value is None
                        else str(result.kubernetes_value),
                    )
                )
                if outcome is Outcome.APPLIED and result.written_to:
                    report.writes += 1
        return report


def default_appliers(
    *, batch_client: Any = None, sagemaker_client: Any = None, eks_connect: Callable[[str], Any] | None = None
) -> list[Applier]:
    return [
        ServiceJobApplier(batch_client),
        TrainingJobTagApplier(sagemaker_client),
        BatchShareApplier(batch_client),
        EksApplier(eks_connect),
    ]


def apply_cycle(
    reports: Iterable[Mapping[str, Any]], registry: RecordSource, appliers: Iterable[Applier]
) -> ApplyReport:
    """Apply every shard's changes; one report for the cycle."""
    changes, missing = changes_from_reports(reports, registry)
    report = apply_all(changes, appliers)
    report.results.extend(missing)
    return report
