"""Apply Osprey priorities (integers 0..100) to EKS jobs (docs/design.md §6).

- The job has a Kueue Workload: merge-patch the Workload's ``spec.priority`` with the Osprey priority mapped
  linearly onto :class:`KueuePriorityRange` (default 0..1000). ``spec.priority`` is mutable in both
  ``kueue.x-k8s.io/v1beta1`` (since Kueue v0.5, KEP-973 "workload priority values are always mutable") and
  ``v1beta2``. The patch carries ``metadata.resourceVersion``, so it only lands on the version that was read;
  on 409 the Workload is re-read and the patch retried, at most ``max_conflict_attempts`` times.
- No Kueue on the cluster, or Kueue does not manage this job (no Workload): the annotation
  ``osprey.aws/derived-priority=<N>`` on the job object, with the same conditional-write loop.

Nothing is written when the cluster already holds the target value, and only objects labelled
``osprey.aws/enabled=true`` are ever written. Each job's outcome is reported on its own; one failure never
stops the rest.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from osprey_control.backends.actuation import ApplyReport as CycleReport
from osprey_control.backends.actuation import ApplyResult as CycleResult
from osprey_control.backends.actuation import Outcome, PriorityChange, prefilter
from osprey_control.backends.eks.client import (
    ConflictError,
    KubernetesApiError,
    KubernetesClient,
    NotFoundError,
)
from osprey_control.backends.eks.connection import connect as connect_cluster
from osprey_control.backends.eks.discovery import workloads_by_owner
from osprey_control.backends.eks.resources import (
    DERIVED_PRIORITY_ANNOTATION,
    JOB_KINDS,
    Resource,
    detect_kueue,
    is_enabled,
    kind_for,
    workload_resource,
)
from osprey_control.errors import TransientError, is_transient
from osprey_control.registry.model import Backend, JobRecord

__all__ = [
    "DEFAULT_KUEUE_PRIORITY_RANGE",
    "ApplyOutcome",
    "ApplyReport",
    "ApplyResult",
    "EksApplier",
    "EksPriorityApplier",
    "KueuePriorityRange",
    "PriorityTarget",
]

logger = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class KueuePriorityRange:
    """The Kueue priority values Osprey's 0..100 maps onto: ``low + (high - low) * p / 100``, half up.

    Pick it to sit among the cluster's WorkloadPriorityClass values, so Osprey orders jobs within a band
    instead of overriding classes set elsewhere.
    """

    low: int = 0
    high: int = 1000

    def __post_init__(self) -> None:
        if not -_INT32_MAX <= self.low < self.high <= _INT32_MAX:
            raise ValueError(
                f"Kueue priority range must satisfy low < high within int32, got {self.low}..{self.high}"
            )

    def map(self, priority: int) -> int:
        if isinstance(priority, bool) or not 0 <= priority <= 100:
            raise ValueError(f"Osprey priority must be an integer 0..100, got {priority!r}")
        return self.low + (priority * (self.high - self.low) * 2 + 100) // 200


DEFAULT_KUEUE_PRIORITY_RANGE = KueuePriorityRange()


@dataclass(frozen=True)
class PriorityTarget:
    """One job to set: ``kind`` is ``Job``/``PyTorchJob``/``JobSet``; None tries each kind in turn."""

    namespace: str
    name: str
    priority: int
    kind: str | None = None

    @classmethod
    def from_native_id(cls, native_id: str, priority: int, kind: str | None = None) -> PriorityTarget:
        namespace, sep, name = native_id.partition("/")
        if not sep or not namespace or not name:
            raise ValueError(f"EKS native id must be 'namespace/name', got {native_id!r}")
        return cls(namespace=namespace, name=name, priority=priority, kind=kind)

    @classmethod
    def from_record(cls, record: JobRecord, priority: int, kind: str | None = None) -> PriorityTarget:
        """The target for a registry record (``backend=eks``, ``native_id=namespace/name``)."""
        if record.backend is not Backend.EKS:
            raise ValueError(f"job {record.key} is not an EKS job; use the {record.backend.value} applier")
        return cls.from_native_id(record.native_id, priority, kind)

    @property
    def native_id(self) -> str:
        return f"{self.namespace}/{self.name}"


class ApplyOutcome(StrEnum):
    APPLIED = "applied"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True)
class ApplyResult:
    native_id: str
    outcome: ApplyOutcome
    reason: str
    priority: int
    written_to: str | None = None  # "workload <ns>/<name>" or "annotation <Kind> <ns>/<name>"
    kubernetes_value: int | None = None  # the Workload priority, when Kueue
    transient: bool = False  # no answer, 429 or 5xx from the API server: worth retrying next cycle

    def to_dict(self) -> dict[str, Any]:
        return {
            "native_id": self.native_id,
            "outcome": self.outcome.value,
            "reason": self.reason,
            "priority": self.priority,
            "written_to": self.written_to,
            "kubernetes_value": self.kubernetes_value,
        }


@dataclass
class ApplyReport:
    cluster: str
    kueue_version: str | None
    results: list[ApplyResult] = field(default_factory=list)

    def count(self, outcome: ApplyOutcome) -> int:
        return sum(1 for result in self.results if result.outcome is outcome)

    @property
    def writes(self) -> int:
        return self.count(ApplyOutcome.APPLIED)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "kueue_version": self.kueue_version,
            "applied": self.count(ApplyOutcome.APPLIED),
            "skipped": self.count(ApplyOutcome.SKIPPED),
            "failed": self.count(ApplyOutcome.FAILED),
            "results": [result.to_dict() for result in self.results],
        }


def _transient(error: BaseException) -> bool:
    # Classified by the client (osprey_control.backends.eks.client): no answer, 429, 5xx, or a 409 this apply already
    # re-read max_conflict_attempts times. A ValueError / KeyError here is a bad object, which no retry mends.
    return isinstance(error, TransientError)


class _Skip(Exception):  # noqa: N818 - control flow, not an error
    pass


class EksPriorityApplier:
    """Writes priorities to one cluster. Kueue detection and Workload lists are cached per :meth:`apply`."""

    def __init__(
        self,
        client: KubernetesClient,
        cluster: str,
        *,
        priority_range: KueuePriorityRange = DEFAULT_KUEUE_PRIORITY_RANGE,
        max_conflict_attempts: int = 5,
    ) -> None:
        if max_conflict_attempts < 1:
            raise ValueError("max_conflict_attempts must be at least 1")
        self.client = client
        self.cluster = cluster
        self.priority_range = priority_range
        self.max_conflict_attempts = max_conflict_attempts

    def apply(self, targets: Iterable[PriorityTarget]) -> ApplyReport:
        try:
            kueue = detect_kueue(self.client)
        except KubernetesApiError as error:
            targets = list(targets)
            reason = f"Kueue API discovery failed: {error}"
            results = [
                ApplyResult(t.native_id, ApplyOutcome.FAILED, reason, t.priority, transient=_transient(error))
                for t in targets
            ]
            return ApplyReport(self.cluster, None, results)
        report = ApplyReport(self.cluster, kueue)
        workloads: dict[str, dict[str, Mapping[str, Any]]] = {}  # namespace -> owner uid -> Workload
        for target in targets:
            try:
                result = self._apply_one(target, kueue, workloads)
            except _Skip as skip:
                result = ApplyResult(target.native_id, ApplyOutcome.SKIPPED, str(skip), target.priority)
            except (KubernetesApiError, ValueError, KeyError, TypeError) as error:
                result = ApplyResult(
                    target.native_id,
                    ApplyOutcome.FAILED,
                    str(error),
                    target.priority,
                    transient=_transient(error),
                )
            if result.outcome is ApplyOutcome.FAILED:
                logger.warning(
                    "eks priority not applied",
                    extra={"cluster": self.cluster, "job": target.native_id, "reason": result.reason},
                )
            report.results.append(result)
        return report

    # -- one job ------------------------------------------------------------------------------------------

    def _find_job(self, target: PriorityTarget) -> tuple[Resource, dict[str, Any]]:
        kinds = (kind_for(target.kind),) if target.kind else JOB_KINDS
        for resource in kinds:
            try:
                return resource, self.client.get(resource.item(target.namespace, target.name))
            except NotFoundError:
                continue
        names = "/".join(resource.kind for resource in kinds)
        raise NotFoundError(
            "GET", target.native_id, 404, "NotFound",
            f"no {names} {target.native_id} on cluster {self.cluster}; it was deleted or never existed",
        )  # fmt: skip

    def _workload_for(
        self, uid: str, namespace: str, kueue: str, cache: dict[str, dict[str, Mapping[str, Any]]]
    ) -> Mapping[str, Any] | None:
        if namespace not in cache:
            listed = self.client.list(workload_resource(kueue).collection(namespace))
            cache[namespace] = workloads_by_owner(listed)
        return cache[namespace].get(uid)

    def _apply_one(
        self, target: PriorityTarget, kueue: str | None, cache: dict[str, dict[str, Mapping[str, Any]]]
    ) -> ApplyResult:
        value = self.priority_range.map(target.priority)  # validates the priority before any call
        resource, job = self._find_job(target)
        if not is_enabled(job):
            raise _Skip("not labelled osprey.aws/enabled=true: Osprey never writes unmanaged objects")
        workload = None
        if kueue is not None:
            workload = self._workload_for(str(job["metadata"].get("uid")), target.namespace, kueue, cache)
        if workload is not None:
            path = workload_resource(kueue or "").item(target.namespace, str(workload["metadata"]["name"]))
            return self._write_workload(target, path, dict(workload), value)
        return self._write_annotation(target, resource, job)

    def _write_workload(
        self, target: PriorityTarget, path: str, workload: dict[str, Any], value: int
    ) -> ApplyResult:
        where = f"workload {target.namespace}/{workload['metadata']['name']}"
        for attempt in range(1, self.max_conflict_attempts + 1):
            if (workload.get("spec") or {}).get("priority") == value:
                reason = "unchanged" if attempt == 1 else "unchanged (set by a concurrent writer)"
                return ApplyResult(
                    target.native_id, ApplyOutcome.SKIPPED, reason, target.priority, where, value
                )
            patch = {
                "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
                "spec": {"priority": value},
            }
            try:
                self.client.merge_patch(path, patch)
            except ConflictError:
                logger.info(
                    "workload changed while patching; re-reading",
                    extra={"cluster": self.cluster, "workload": where, "attempt": attempt},
                )
                workload = self.client.get(path)
                continue
            return ApplyResult(
                target.native_id, ApplyOutcome.APPLIED, "patched", target.priority, where, value
            )
        raise ConflictError(
            "PATCH", path, 409, "Conflict",
            f"{where} kept changing: gave up after {self.max_conflict_attempts} attempts; the next cycle retries",
        )  # fmt: skip

    def _write_annotation(
        self, target: PriorityTarget, resource: Resource, job: dict[str, Any]
    ) -> ApplyResult:
        path = resource.item(target.namespace, target.name)
        where = f"annotation {resource.kind} {target.native_id}"
        wanted = str(target.priority)
        for attempt in range(1, self.max_conflict_attempts + 1):
            if not is_enabled(job):
                raise _Skip("osprey.aws/enabled label was removed; not written")
            annotations = job["metadata"].get("annotations") or {}
            if annotations.get(DERIVED_PRIORITY_ANNOTATION) == wanted:
                reason = "unchanged" if attempt == 1 else "unchanged (set by a concurrent writer)"
                return ApplyResult(target.native_id, ApplyOutcome.SKIPPED, reason, target.priority, where)
            patch = {
                "metadata": {
                    "resourceVersion": job["metadata"]["resourceVersion"],
                    "annotations": {DERIVED_PRIORITY_ANNOTATION: wanted},
                }
            }
            try:
                self.client.merge_patch(path, patch)
            except ConflictError:
                job = self.client.get(path)
                continue
            return ApplyResult(target.native_id, ApplyOutcome.APPLIED, "annotated", target.priority, where)
        raise ConflictError(
            "PATCH", path, 409, "Conflict",
            f"{where} kept changing: gave up after {self.max_conflict_attempts} attempts; the next cycle retries",
        )  # fmt: skip


class EksApplier:
    """The apply step's :class:`~osprey_control.backends.Applier` for ``eks`` jobs, over :class:`EksPriorityApplier`, one per cluster.

    ``connect`` builds a Kubernetes client for a cluster name (default: EKS DescribeCluster + IAM token); a
    cluster that cannot be reached fails only its own jobs.
    """

    backends = frozenset({Backend.EKS})
    chunk_size = 50  # one PATCH per job; each chunk connects again (DescribeCluster + token), hence larger

    def __init__(self, connect: Callable[[str], Any] | None = None) -> None:
        self._connect = connect

    def apply(self, changes: Sequence[PriorityChange]) -> CycleReport:
        # The same unchanged/invalid rules as the AWS appliers, then per cluster.
        todo, results = prefilter(changes, self.backends)
        report = CycleReport(results)
        by_cluster: dict[str, list[PriorityChange]] = defaultdict(list)
        for change in todo:
            if change.record.cluster is None:
                report.results.append(
                    CycleResult(
                        change.record.key, Outcome.FAILED, change.priority, "EKS job without a cluster"
                    )
                )
                continue
            by_cluster[change.record.cluster].append(change)
        outcomes = {ApplyOutcome.APPLIED: Outcome.APPLIED, ApplyOutcome.SKIPPED: Outcome.SKIPPED}
        for cluster, batch in by_cluster.items():
            keys = {change.record.native_id: change.record.key for change in batch}
            try:
                client = (self._connect or connect_cluster)(cluster)
                eks_report = EksPriorityApplier(client, cluster).apply(
                    PriorityTarget.from_record(change.record, change.priority) for change in batch
                )
            except Exception as error:  # an unreachable cluster fails its own jobs only
                reason = f"cluster {cluster}: {type(error).__name__}: {error}"
                # Classified where it was raised: DescribeCluster throttled, no answer from the API server or a
                # cluster still being created are transient; a refused credential or a bug is not.
                transient = is_transient(error)
                report.results.extend(
                    CycleResult(c.record.key, Outcome.FAILED, c.priority, reason, transient=transient)
                    for c in batch
                )
                continue
            for result in eks_report.results:
                outcome = outcomes.get(result.outcome, Outcome.FAILED)
                report.results.append(
                    CycleResult(
                        keys[result.native_id],
                        outcome,
                        result.priority,
                        result.reason,
                        transient=result.transient,
                        native_value=None
                        if result.kubernetes_value is None
                        else str(result.kubernetes_value),
                    )
                )
                if outcome is Outcome.APPLIED and result.written_to:
                    report.writes += 1
        return report
