"""Apply Osprey priorities (integers 0..100) to EKS jobs (docs/design.md §6).

- The job has a Kueue Workload: merge-patch the Workload's ``spec.priority`` with the Osprey priority mapped
  linearly onto :class:`KueuePriorityRange` (default 0..1000). ``spec.priority`` is mutable in both
  ``kueue.x-k8s.io/v1beta1`` (since Kueue v0.5, KEP-973 "workload priority values are always mutable") and
  ``v1beta2``. The patch carries ``metadata.resourceVersion``, so it only lands on the version that was read;
  on 409 the Workload is re-read and the patch retried, at most ``max_conflict_attempts`` times.
- No Kueue on the cluster, or Kueue does not manage this job (no Workload): the annotation
  ``osprey.aws/derived-priority=<N>`` on the job object, with the same conditional-write loop.

Nothing is written when the cluster already holds the target value, and that is success: the job is reported
APPLIED (:func:`~osprey_control.backends.actuation.already_set`), so the apply step records the priority as
applied. That includes the value found on the re-read after a 409: a PATCH that landed but whose answer was
lost is retried by the client with the same ``resourceVersion``, which the API server refuses, and what the
re-read shows is the PATCH that landed. Only objects labelled ``osprey.aws/enabled=true`` are ever written.
Each job's outcome is reported on its own; one failure never stops the rest, and a cluster that cannot be
reached fails only its own jobs.

:class:`EksApplier` reports in the shared terms of :mod:`osprey_control.backends.actuation`: ``reason`` names
what was written or found ("workload ns/name", "annotation Kind ns/name"), ``native_value`` is the Workload's
``spec.priority`` when Kueue holds the priority, and ``writes`` counts the PATCHes answered with success.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osprey_control.backends.actuation import (
    ALREADY_SET,
    ApplyReport,
    ApplyResult,
    Outcome,
    PriorityChange,
    already_set,
    prefilter,
)
from osprey_control.backends.eks.client import (
    ConflictError,
    KubernetesApiError,
    KubernetesClient,
    NotFoundError,
)
from osprey_control.backends.eks.connection import connect as connect_cluster
from osprey_control.backends.eks.ownership import is_owned_by, owned_workloads
from osprey_control.backends.eks.resources import (
    JOB_KINDS,
    Resource,
    detect_kueue,
    is_enabled,
    workload_resource,
)
from osprey_control.errors import TransientError, is_transient
from osprey_control.registry import Backend, JobKey, JobRecord, eks_job_id
from osprey_control.wiring import DERIVED_PRIORITY_ANNOTATION

__all__ = ["DEFAULT_KUEUE_PRIORITY_RANGE", "EksApplier", "KueuePriorityRange"]

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

    def unmap(self, value: float) -> float:
        """The Osprey priority a Kueue value stands for (the inverse of :meth:`map`, not clamped: a class value
        above ``high`` is above every priority Osprey writes)."""
        return (value - self.low) * 100 / (self.high - self.low)


DEFAULT_KUEUE_PRIORITY_RANGE = KueuePriorityRange()


class EksApplier:
    """The apply step's :class:`~osprey_control.backends.actuation.Applier` for ``eks`` jobs.

    The jobs of a call are grouped by cluster; each cluster is connected once, asked once whether it runs Kueue,
    and each of its jobs written on its own. ``connect`` builds a Kubernetes client for a cluster name (default:
    EKS DescribeCluster + IAM token); a cluster that cannot be reached fails only its own jobs.
    """

    backends = frozenset({Backend.EKS})
    chunk_size = 50  # one PATCH per job; each chunk connects again (DescribeCluster + token), hence larger

    def __init__(
        self,
        connect: Callable[[str], KubernetesClient] | None = None,
        *,
        priority_range: KueuePriorityRange = DEFAULT_KUEUE_PRIORITY_RANGE,
        max_conflict_attempts: int = 5,
    ) -> None:
        if max_conflict_attempts < 1:
            raise ValueError("max_conflict_attempts must be at least 1")
        self._connect = connect
        self.priority_range = priority_range
        self.max_conflict_attempts = max_conflict_attempts

    def unwritten_priority(self, record: JobRecord) -> float | None:
        """What a Workload Osprey has not written holds, in Osprey's terms: its first observed priority (its
        WorkloadPriorityClass value) through this range (None: not observed). The apply step's write order reads
        it (:func:`osprey_control.backends.write_order.write_phase`)."""
        return None if record.native_priority is None else self.priority_range.unmap(record.native_priority)

    def apply(self, changes: Sequence[PriorityChange]) -> ApplyReport:
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
        for cluster, batch in by_cluster.items():
            try:
                client = (self._connect or connect_cluster)(cluster)
                # Its own report, merged only once the whole cluster is done: an error no job handler expects
                # (below) fails the cluster's jobs as one, like a cluster that cannot be reached.
                writes = _ClusterWrites(client, cluster, self.priority_range, self.max_conflict_attempts)
                report.extend(writes.apply(batch))
            except Exception as error:  # an unreachable cluster fails its own jobs only
                reason = f"cluster {cluster}: {type(error).__name__}: {error}"
                # Classified where it was raised: DescribeCluster throttled, no answer from the API server or a
                # cluster still being created are transient; a refused credential or a bug is not.
                transient = is_transient(error)
                report.results.extend(
                    ApplyResult(c.record.key, Outcome.FAILED, c.priority, reason, transient=transient)
                    for c in batch
                )
        return report


def _transient(error: BaseException) -> bool:
    # Classified by the client (osprey_control.backends.eks.client): no answer, 429, 5xx, or a 409 this apply
    # already re-read max_conflict_attempts times. A ValueError / KeyError here is a bad object, which no retry
    # mends.
    return isinstance(error, TransientError)


class _Skip(Exception):  # noqa: N818 - control flow, not an error
    pass


@dataclass(frozen=True)
class _Target:
    """One job to write: its registry key, where it lives on the cluster, its uid (None for a legacy id) and
    its Osprey priority."""

    key: JobKey
    namespace: str
    name: str
    uid: str | None
    priority: int

    @classmethod
    def of(cls, change: PriorityChange) -> _Target:
        job = eks_job_id(change.record.native_id)  # ValueError names the forms allowed
        return cls(change.record.key, job.namespace, job.name, job.uid, change.priority)

    @property
    def native_id(self) -> str:
        return f"{self.namespace}/{self.name}"


class _ClusterWrites:
    """One cluster's share of an :meth:`EksApplier.apply` call. Kueue detection and the Workload lists are
    cached for this call only: the next call sees Kueue installed or removed since."""

    def __init__(
        self,
        client: KubernetesClient,
        cluster: str,
        priority_range: KueuePriorityRange,
        max_conflict_attempts: int,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.priority_range = priority_range
        self.max_conflict_attempts = max_conflict_attempts
        self._workloads: dict[str, list[Mapping[str, Any]]] = {}  # namespace -> its Workloads

    def apply(self, batch: Sequence[PriorityChange]) -> ApplyReport:
        report = ApplyReport()
        try:
            kueue = detect_kueue(self.client)
        except KubernetesApiError as error:
            reason = f"Kueue API discovery failed: {error}"
            report.results.extend(
                ApplyResult(c.record.key, Outcome.FAILED, c.priority, reason, transient=_transient(error))
                for c in batch
            )
            return report
        for change in batch:
            try:
                result = self._apply_one(_Target.of(change), kueue)
            except _Skip as skip:
                result = ApplyResult(change.record.key, Outcome.SKIPPED, change.priority, str(skip))
            except (KubernetesApiError, ValueError, KeyError, TypeError) as error:
                result = ApplyResult(
                    change.record.key,
                    Outcome.FAILED,
                    change.priority,
                    str(error),
                    transient=_transient(error),
                )
            if result.outcome is Outcome.FAILED:
                logger.warning(
                    "eks priority not applied",
                    extra={"cluster": self.cluster, "job": change.record.native_id, "reason": result.reason},
                )
            elif result.outcome is Outcome.APPLIED and not result.reason.startswith(ALREADY_SET):
                report.writes += 1  # a PATCH answered with success (a value found in place was not written)
            report.results.append(result)
        return report

    # -- one job ------------------------------------------------------------------------------------------

    def _find_job(self, target: _Target) -> tuple[Resource, dict[str, Any]]:
        # Each kind in turn, Job first: the object is found whatever kind (if any) the registry recorded.
        # The uid must match: an object re-created under the same name is another job (registry.identity), and
        # this record's priority is not its own.
        for resource in JOB_KINDS:
            try:
                job = self.client.get(resource.item(target.namespace, target.name))
            except NotFoundError:
                continue
            if target.uid is None or str((job.get("metadata") or {}).get("uid")) == target.uid:
                return resource, job
        names = "/".join(resource.kind for resource in JOB_KINDS)
        uid = f" with uid {target.uid}" if target.uid else ""
        raise NotFoundError(
            "GET", target.native_id, 404, "NotFound",
            f"no {names} {target.native_id}{uid} on cluster {self.cluster}; it was deleted or never existed"
            + (" (one of that name with another uid is another job)" if uid else ""),
        )  # fmt: skip

    def _workload_for(self, job: Mapping[str, Any], namespace: str, kueue: str) -> Mapping[str, Any] | None:
        """The Workload ``job`` owns (:mod:`.ownership`); None when Kueue does not manage it. Several is an
        error: Osprey cannot tell which one Kueue schedules, so it writes none."""
        if namespace not in self._workloads:
            self._workloads[namespace] = list(
                self.client.list(workload_resource(kueue).collection(namespace))
            )
        owned = owned_workloads(self._workloads[namespace], job)
        if len(owned) > 1:
            names = ", ".join(sorted(str(w["metadata"]["name"]) for w in owned))
            raise ValueError(f"several Kueue Workloads are controlled by {namespace}/{job['metadata']['name']} "
                             f"({names}); none is written")  # fmt: skip
        return owned[0] if owned else None

    def _apply_one(self, target: _Target, kueue: str | None) -> ApplyResult:
        value = self.priority_range.map(target.priority)  # validates the priority before any call
        resource, job = self._find_job(target)
        if not is_enabled(job):
            raise _Skip("not labelled osprey.aws/enabled=true: Osprey never writes unmanaged objects")
        workload = None
        if kueue is not None:
            workload = self._workload_for(job, target.namespace, kueue)
        if kueue is not None and workload is not None:
            path = workload_resource(kueue).item(target.namespace, str(workload["metadata"]["name"]))
            return self._write_workload(target, path, dict(workload), value, job)
        return self._write_annotation(target, resource, job)

    def _write_workload(
        self, target: _Target, path: str, workload: dict[str, Any], value: int, job: Mapping[str, Any]
    ) -> ApplyResult:
        where = f"workload {target.namespace}/{workload['metadata']['name']}"
        for attempt in range(1, self.max_conflict_attempts + 1):
            if not is_owned_by(workload, job):  # re-read after a 409: it may have changed owners
                raise _Skip(
                    f"{where} is no longer controlled by the job; Osprey writes only its job's Workload"
                )
            if (workload.get("spec") or {}).get("priority") == value:
                return self._in_place(target, where, attempt, native_value=str(value))
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
                target.key, Outcome.APPLIED, target.priority, f"patched {where}", native_value=str(value)
            )
        raise self._gave_up(path, where)

    def _write_annotation(self, target: _Target, resource: Resource, job: dict[str, Any]) -> ApplyResult:
        path = resource.item(target.namespace, target.name)
        where = f"annotation {resource.kind} {target.native_id}"
        wanted = str(target.priority)
        uid = job["metadata"].get("uid")  # the object that opted in; a re-read must still be that one
        for attempt in range(1, self.max_conflict_attempts + 1):
            if not is_enabled(job):
                raise _Skip("osprey.aws/enabled label was removed; not written")
            if job["metadata"].get("uid") != uid:
                raise _Skip(f"{where} was deleted and re-created since it was read; not written")
            annotations = job["metadata"].get("annotations") or {}
            if annotations.get(DERIVED_PRIORITY_ANNOTATION) == wanted:
                return self._in_place(target, where, attempt)
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
            return ApplyResult(target.key, Outcome.APPLIED, target.priority, f"patched {where}")
        raise self._gave_up(path, where)

    @staticmethod
    def _in_place(target: _Target, where: str, attempt: int, native_value: str | None = None) -> ApplyResult:
        # The cluster holds the value: APPLIED, never a skip, which would leave applied_priority stale. After
        # a 409 it is our own PATCH whose answer was lost, or a concurrent writer's: the same value anyway.
        how = "" if attempt == 1 else "re-read after a conflict: a lost answer or a concurrent writer"
        return already_set(target.key, target.priority, native_value, where, how)

    def _gave_up(self, path: str, where: str) -> ConflictError:
        return ConflictError(
            "PATCH", path, 409, "Conflict",
            f"{where} kept changing: gave up after {self.max_conflict_attempts} attempts; the next cycle retries",
        )  # fmt: skip
