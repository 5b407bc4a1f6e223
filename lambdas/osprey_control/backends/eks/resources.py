"""The Kubernetes resources Osprey reads and writes, their REST paths, and Kueue API version detection."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from osprey_control.backends.eks.client import KubernetesClient, NotFoundError
from osprey_control.contract import ENABLED_KUBERNETES, OPT_IN, opted_in

__all__ = ["admission_policy", "detect_kueue"]

ENABLED_SELECTOR = f"{ENABLED_KUBERNETES}={OPT_IN}"
KUEUE_GROUP = "kueue.x-k8s.io"
# Newest first: the first one the cluster serves is used.
KUEUE_VERSIONS = ("v1beta2", "v1beta1")


@dataclass(frozen=True)
class Resource:
    """One namespaced resource type: ``group`` is empty for the core API."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def _prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection(self, namespace: str | None = None) -> str:
        """The list path; all namespaces when ``namespace`` is None."""
        if namespace is None:
            return f"{self._prefix}/{self.plural}"
        return f"{self._prefix}/namespaces/{namespace}/{self.plural}"

    def item(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace)}/{name}"


BATCH_JOB = Resource("batch", "v1", "jobs", "Job")
PYTORCHJOB = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
JOBSET = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
JOB_KINDS: tuple[Resource, ...] = (BATCH_JOB, PYTORCHJOB, JOBSET)
POD = Resource("", "v1", "pods", "Pod")
NODE_PATH = "/api/v1/nodes"


def kind_for(kind: str) -> Resource:
    """The job resource for a kind name (``Job``, ``PyTorchJob``, ``JobSet``, any case)."""
    for resource in JOB_KINDS:
        if resource.kind.lower() == kind.lower():
            return resource
    allowed = ", ".join(resource.kind for resource in JOB_KINDS)
    raise ValueError(f"unsupported Kubernetes job kind {kind!r}; supported: {allowed}")


def workload_resource(version: str) -> Resource:
    return Resource(KUEUE_GROUP, version, "workloads", "Workload")


def detect_kueue(client: KubernetesClient) -> str | None:
    """The Kueue API version to use (``v1beta2`` preferred), or None when the cluster has no Kueue."""
    try:
        group = client.get(f"/apis/{KUEUE_GROUP}")
    except NotFoundError:
        return None
    served = {str(entry.get("version")) for entry in group.get("versions") or [] if isinstance(entry, dict)}
    return next((version for version in KUEUE_VERSIONS if version in served), None)


def is_enabled(obj: Mapping[str, Any]) -> bool:
    """The object carries the opt-in label, exactly ``osprey.aws/enabled=true`` (only these are ever written; the
    one definition of opt-in, :func:`osprey_control.contract.opted_in`, as the label selector matches it)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return opted_in(ENABLED_KUBERNETES, labels if isinstance(labels, Mapping) else None)


def admission_policy() -> str:
    """The ValidatingAdmissionPolicy and its binding that limit Osprey's writes (``admission-policy.yaml`` beside
    this module; docs/eks.md, "Admission policy"): what ``osprey eks admission`` prints."""
    return resources.files(__package__).joinpath("admission-policy.yaml").read_text(encoding="utf-8")
