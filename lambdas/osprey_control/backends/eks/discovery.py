"""Discover Osprey-managed jobs on one EKS cluster: Jobs, PyTorchJobs, JobSets and their Kueue Workloads.

One pass lists, across all namespaces or only the configured ones, every job kind with the selector
``osprey.aws/enabled=true`` (a kind whose CRD is not installed answers 404 and is skipped), the Kueue Workloads
with the same selector (Kueue copies the label: ``labelKeysToCopy``) when the cluster serves Kueue, and
optionally the labelled pods, as metadata-only Tables (never a pod's spec, which holds environment values), and
the nodes they run on. Each job becomes an :class:`EksObservation` whose native id names the cluster and the
object's uid, from which the registry builds a :class:`~osprey_control.registry.model.JobRecord`.

Status mapping (first match wins; documented in docs/eks.md):

============  =================================================================================
SUCCEEDED     condition ``Complete`` / ``SuccessCriteriaMet`` (Job), ``Succeeded`` (PyTorchJob),
              ``Completed`` (JobSet) is True
FAILED        condition ``Failed`` / ``FailureTarget`` is True
PENDING       the job is suspended (``spec.suspend``, ``spec.runPolicy.suspend``, condition
              ``Suspended``), or its Kueue Workload is not admitted
RUNNING       at least one pod ready (Job ``status.ready``, JobSet ``replicatedJobsStatus[].ready``)
              or PyTorchJob condition ``Running``
STARTING      pods exist but none is ready yet (``status.active``, PyTorchJob ``Created``/``Restarting``)
PENDING       otherwise
============  =================================================================================
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from osprey_control.backends.eks.client import KubernetesClient, NotFoundError
from osprey_control.backends.eks.observation import (
    DiscoveryResult,
    EksDiscoveryProblem,
    EksObservation,
    WorkloadRef,
)
from osprey_control.backends.eks.requests import job_declared_runtime, job_requested_gpus, pod_template_gpus
from osprey_control.backends.eks.resources import (
    ENABLED_SELECTOR,
    JOB_KINDS,
    JOBSET,
    NODE_PATH,
    POD,
    PYTORCHJOB,
    Resource,
    detect_kueue,
    workload_resource,
)
from osprey_control.contract import OspreyBlockError, from_kubernetes
from osprey_control.registry import EksJobId, JobStatus, NodeKind, NodeRef
from osprey_control.wiring import DERIVED_PRIORITY_ANNOTATION

__all__ = ["discover"]

# The label each operator puts on the pods of one job, so one pod list serves every job.
_POD_JOB_LABEL: dict[str, str] = {
    "Job": "batch.kubernetes.io/job-name",
    "PyTorchJob": "training.kubeflow.org/job-name",
    "JobSet": "jobset.sigs.k8s.io/jobset-name",
}
_LEGACY_JOB_LABEL = "job-name"  # before Kubernetes 1.27


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _true_conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {
        str(cond.get("type")): cond
        for cond in conditions
        if isinstance(cond, Mapping) and str(cond.get("status")) == "True"
    }


_SUCCEEDED = ("Complete", "SuccessCriteriaMet", "Succeeded", "Completed")
_FAILED = ("Failed", "FailureTarget")


def _suspended(kind: str, spec: Mapping[str, Any], true: Mapping[str, Any]) -> bool:
    if "Suspended" in true or spec.get("suspend") is True:
        return True
    return kind == PYTORCHJOB.kind and (spec.get("runPolicy") or {}).get("suspend") is True


def _pods_state(kind: str, status: Mapping[str, Any], true: Mapping[str, Any]) -> JobStatus | None:
    if kind == JOBSET.kind:
        replicated = [item for item in status.get("replicatedJobsStatus") or [] if isinstance(item, Mapping)]
        ready = sum(int(item.get("ready") or 0) for item in replicated)
        active = sum(int(item.get("active") or 0) for item in replicated)
    elif kind == PYTORCHJOB.kind:
        if "Running" in true:
            return JobStatus.RUNNING
        if "Created" in true or "Restarting" in true:
            return JobStatus.STARTING
        return None
    else:
        ready, active = int(status.get("ready") or 0), int(status.get("active") or 0)
    if ready > 0:
        return JobStatus.RUNNING
    if active > 0:
        return JobStatus.STARTING
    return None


def job_status(
    obj: Mapping[str, Any], workload: WorkloadRef | None = None
) -> tuple[JobStatus, datetime | None]:
    """The registry status of a job object and when it last changed (module docstring: the mapping)."""
    kind = str(obj.get("kind", ""))
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    true = _true_conditions(obj)

    def at(*types: str) -> datetime | None:
        return next((_time(true[name].get("lastTransitionTime")) for name in types if name in true), None)

    if any(name in true for name in _SUCCEEDED):
        return JobStatus.SUCCEEDED, at(*_SUCCEEDED) or _time(status.get("completionTime"))
    if any(name in true for name in _FAILED):
        return JobStatus.FAILED, at(*_FAILED)
    if _suspended(kind, spec, true) or (workload is not None and not workload.admitted):
        return JobStatus.PENDING, at("Suspended")
    state = _pods_state(kind, status, true)
    if state is not None:
        return state, at("Running", "Created", "Restarting") or _time(status.get("startTime"))
    return JobStatus.PENDING, None


def _workload_ref(obj: Mapping[str, Any]) -> WorkloadRef:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    priority = spec.get("priority")
    admitted = "Admitted" in _true_conditions(obj) or bool(status.get("admission"))
    return WorkloadRef(
        name=str(obj["metadata"]["name"]),
        api_version=str(obj.get("apiVersion", "")),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
        # v1beta1 spells it priorityClassName; v1beta2 (Kueue v0.15+) has priorityClassRef {group, kind, name}.
        priority_class=spec.get("priorityClassName") or (spec.get("priorityClassRef") or {}).get("name"),
        admitted=admitted,
    )


def workloads_by_owner(items: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Kueue Workloads keyed by the uid of the job that owns them (Kueue sets the ownerReference)."""
    owned: dict[str, Mapping[str, Any]] = {}
    for item in items:
        for owner in (item.get("metadata") or {}).get("ownerReferences") or []:
            if isinstance(owner, Mapping) and owner.get("uid"):
                owned[str(owner["uid"])] = item
    return owned


_INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")


def _instances(client: KubernetesClient) -> dict[str, tuple[str | None, str | None]]:
    """Node name → (EC2 instance id from ``spec.providerID`` ``aws:///us-east-1a/i-0abc``, instance type from
    the well-known node label)."""
    result: dict[str, tuple[str | None, str | None]] = {}
    for node in client.list(NODE_PATH):
        provider = str((node.get("spec") or {}).get("providerID") or "")
        instance_id = (
            provider.rsplit("/", 1)[-1] if provider.startswith("aws://") and "/i-" in provider else None
        )
        labels = (node.get("metadata") or {}).get("labels") or {}
        instance_type = next((str(labels[name]) for name in _INSTANCE_TYPE_LABELS if labels.get(name)), None)
        result[str(node["metadata"]["name"])] = (instance_id, instance_type)
    return result


_Pods = dict[tuple[str, str, str], list[tuple[NodeRef, Mapping[str, Any]]]]


def _pods_by_job(client: KubernetesClient, namespaces: Sequence[str | None]) -> _Pods:
    """The labelled pods of each job, ``(namespace, kind, job name) → [(NodeRef, the pod's labels)]``, read as
    a server-side Table: metadata and the ``Node`` column only, never a pod's spec (its environment values)."""
    rows = [
        row
        for namespace in namespaces
        for row in client.list_table(POD.collection(namespace), label_selector=ENABLED_SELECTOR)
    ]
    placed = any(_node_name(cells) for _, cells in rows)
    instances = _instances(client) if placed else {}
    grouped: _Pods = defaultdict(list)
    for metadata, cells in rows:
        labels = metadata.get("labels") or {}
        instance_id, instance_type = instances.get(_node_name(cells) or "", (None, None))
        ref = NodeRef(
            kind=NodeKind.POD,
            node_id=str(metadata.get("name")),
            instance_id=instance_id,
            instance_type=instance_type,
        )
        for kind, label in _POD_JOB_LABEL.items():
            job_name = labels.get(label) or (labels.get(_LEGACY_JOB_LABEL) if kind == "Job" else None)
            if job_name:
                grouped[(str(metadata.get("namespace")), kind, str(job_name))].append((ref, labels))
    return grouped


def _node_name(cells: Mapping[str, Any]) -> str | None:
    node = str(cells.get("Node") or "")
    return node if node and node != "<none>" else None


def _owned_by_jobset(obj: Mapping[str, Any]) -> bool:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(owner, Mapping) and owner.get("kind") == JOBSET.kind for owner in owners)


def _list_kind(
    client: KubernetesClient, resource: Resource, result: DiscoveryResult, namespaces: Sequence[str | None]
) -> list[Mapping[str, Any]]:
    try:
        return [
            obj
            for namespace in namespaces
            for obj in client.list(resource.collection(namespace), label_selector=ENABLED_SELECTOR)
        ]
    except NotFoundError:
        result.kinds_missing.append(resource.api_version + "/" + resource.kind)  # CRD not installed: normal
        return []


def _modified(metadata: Mapping[str, Any]) -> datetime | None:
    """The newest ``managedFields[].time``: when any manager (a user, the job controller's status updates)
    last changed the object."""
    times = [
        _time(entry.get("time"))
        for entry in metadata.get("managedFields") or []
        if isinstance(entry, Mapping)
    ]
    known = [when for when in times if when is not None]
    return max(known) if known else None


def _derived(annotations: Mapping[str, Any]) -> int | None:
    raw = str(annotations.get(DERIVED_PRIORITY_ANNOTATION, "")).strip()
    return int(raw) if raw.isdigit() else None


def discover(
    client: KubernetesClient,
    cluster: str,
    *,
    include_pods: bool = True,
    namespaces: Sequence[str] = (),
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> DiscoveryResult:
    """Every Osprey job on the cluster behind ``client`` (see the module docstring), in ``namespaces`` only
    when given (else all). Raises on any failed request: a partial listing is never returned, because
    reconciliation reads absence from it as "deleted"."""
    scope: tuple[str | None, ...] = tuple(namespaces) or (None,)
    result = DiscoveryResult(cluster=cluster, kueue_version=detect_kueue(client))
    owned: dict[str, Mapping[str, Any]] = {}
    if result.kueue_version is not None:
        workloads = workload_resource(result.kueue_version)
        try:
            # Only Osprey's: Kueue copies the opt-in label (integrations.labelKeysToCopy, docs/eks.md), and a
            # Workload's podSets hold the job's pod templates, other teams' environment values included.
            owned = workloads_by_owner(
                item
                for namespace in scope
                for item in client.list(workloads.collection(namespace), label_selector=ENABLED_SELECTOR)
            )
        except NotFoundError:
            # The group is advertised but Workloads are not served (Kueue being installed or removed).
            result.kueue_version = None
    pods = _pods_by_job(client, scope) if include_pods else {}
    for resource in JOB_KINDS:
        for obj in _list_kind(client, resource, result, scope):
            # A JobSet's child Jobs belong to the JobSet: the parent is the unit Osprey manages.
            if resource is not JOBSET and _owned_by_jobset(obj):
                continue
            metadata = obj.get("metadata") or {}
            namespace, name = str(metadata.get("namespace", "default")), str(metadata.get("name"))
            where = f"{resource.kind} {namespace}/{name}"
            annotations = metadata.get("annotations") or {}
            uid = str(metadata.get("uid") or "")
            if not uid or "/" in uid:
                # The uid is the job's identity (registry.identity); every object the API server stores has one.
                result.problems.append(
                    EksDiscoveryProblem(cluster, where, "metadata.uid is missing or invalid")
                )
                continue
            native = str(EksJobId(cluster, namespace, name, uid))
            try:
                block = from_kubernetes(metadata.get("labels") or {}, annotations, strict=False)
            except OspreyBlockError as error:
                result.problems.append(EksDiscoveryProblem(cluster, where, str(error), native))
                continue
            if block is None:
                continue
            workload_obj = owned.get(uid)
            workload = _workload_ref(workload_obj) if workload_obj is not None else None
            status, changed = job_status({**obj, "kind": resource.kind}, workload)
            created = _time(metadata.get("creationTimestamp"))
            nodes = tuple(
                ref.model_copy(update={"gpus": pod_template_gpus(resource.kind, obj, labels)})
                for ref, labels in pods.get((namespace, resource.kind, name), ())
            )
            # The templates first (they exist before any pod, so a queued job has its GPUs); else its pods'.
            pod_total = sum(node.gpus or 0 for node in nodes)
            requested = job_requested_gpus(resource.kind, obj) or pod_total or None
            result.observations.append(
                EksObservation(
                    cluster=cluster,
                    namespace=namespace,
                    name=name,
                    kind=resource.kind,
                    api_version=resource.api_version,
                    uid=uid,
                    block=block,
                    status=status,
                    status_time=changed or created or now(),
                    submitted_at=created,
                    workload=workload,
                    nodes=nodes,
                    derived_priority=_derived(annotations),
                    kueue_version=result.kueue_version,
                    labels={str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
                    modified_at=_modified(metadata),
                    requested_gpus=requested,
                    declared_runtime_s=job_declared_runtime(resource.kind, obj),
                )
            )
    return result
