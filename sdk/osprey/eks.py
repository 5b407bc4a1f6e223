"""``osprey.eks.annotate``: put the ``osprey`` block on a Kubernetes training manifest.

Supported kinds: ``batch/v1`` ``Job``, ``kubeflow.org/v1`` ``PyTorchJob`` and ``jobset.x-k8s.io/v1alpha2``
``JobSet``. What is added (a value already in the manifest that contradicts the block is an error):

- On the object's ``metadata``: labels ``osprey.aws/enabled`` and ``osprey.aws/policy``; annotations
  ``osprey.aws/co-schedule``, ``osprey.aws/gang-timeout``, ``osprey.aws/min-workers``,
  ``osprey.aws/initial-priority`` (only for fields that are set; docs/design.md §5).
- On every pod template: the same two labels (so pods can be selected), and in every container (init
  containers excluded) the ``OSPREY_*`` environment plus what ``osprey.runtime`` needs to name its metrics:
  ``OSPREY_K8S_NAMESPACE`` and ``OSPREY_K8S_POD_NAME`` from the downward API and
  ``OSPREY_JOB_ID=$(OSPREY_K8S_NAMESPACE)/<metadata.name>``.
- Kueue (checked against the Kueue v0.5 to v0.14 documentation): ``queue`` becomes the
  ``kueue.x-k8s.io/queue-name`` label (the LocalQueue) and ``priority_class=`` the
  ``kueue.x-k8s.io/priority-class`` label (a WorkloadPriorityClass); existing Kueue labels are kept.
  ``required_min_workers`` becomes ``kueue.x-k8s.io/job-min-parallelism`` only on a ``batch/v1`` Job,
  the one kind whose partial admission Kueue drives through that annotation (feature gate
  ``PartialAdmission``, beta and on by default since v0.5): ``ceil(parallelism * percent / 100)``,
  written only when it is between 1 and ``parallelism - 1`` as Kueue's webhook requires. PyTorchJob and
  JobSet are admitted all-or-nothing by Kueue; Osprey's gang watch reads ``osprey.aws/min-workers``.
- ``share_identifier`` is an AWS Batch concept and is rejected here.
- Checked up front: ``queue`` and ``priority_class`` must be Kueue object names usable as label values
  (DNS-1123 subdomain, at most 63 characters; a Batch job queue ARN is refused); container ``env`` must be
  a list of named entries; an ``OSPREY_*`` contract variable set with ``valueFrom`` is an error (its value
  is unknown until run time and would override the block); an ``osprey.aws/*`` key that is both a label
  and an annotation must have one value.

The input is not modified; a new manifest is returned.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from osprey_control.contract import (
    ENVIRONMENT,
    KUBERNETES,
    OspreyBlockError,
    Source,
    merge_block,
    parse_block,
    to_environment,
    to_kubernetes,
)
from osprey_control.wiring import (
    RUNTIME_JOB_ID_VARIABLE,
    RUNTIME_POD_NAME_VARIABLE,
    RUNTIME_POD_NAMESPACE_VARIABLE,
)

__all__ = [
    "KUEUE_MIN_PARALLELISM",
    "KUEUE_PRIORITY_CLASS",
    "KUEUE_QUEUE_NAME",
    "SUPPORTED_KINDS",
    "annotate",
    "label_annotation_conflicts",
]

KUEUE_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
KUEUE_MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"

SUPPORTED_KINDS: dict[tuple[str, str], str] = {
    ("batch/v1", "Job"): "job",
    ("kubeflow.org/v1", "PyTorchJob"): "pytorchjob",
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobset",
}


def _mapping(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = parent.setdefault(key, {})
    if value is None:
        value = parent[key] = {}
    if not isinstance(value, dict):
        raise OspreyBlockError(
            [(where, f"must be a mapping (got {type(value).__name__})")], source="manifest"
        )
    return value


def _pod_templates(manifest: dict[str, Any], kind: str) -> Iterator[tuple[dict[str, Any], str]]:
    spec = _mapping(manifest, "spec", "spec")
    if kind == "job":
        yield _mapping(spec, "template", "spec.template"), "spec.template"
    elif kind == "pytorchjob":
        replicas = _mapping(spec, "pytorchReplicaSpecs", "spec.pytorchReplicaSpecs")
        for role, replica in replicas.items():
            where = f"spec.pytorchReplicaSpecs.{role}"
            if not isinstance(replica, dict):
                raise OspreyBlockError([(where, "must be a mapping")], source="manifest")
            yield _mapping(replica, "template", f"{where}.template"), f"{where}.template"
    else:
        jobs = spec.get("replicatedJobs") or []
        if not isinstance(jobs, list):
            raise OspreyBlockError([("spec.replicatedJobs", "must be a list")], source="manifest")
        for index, job in enumerate(jobs):
            where = f"spec.replicatedJobs[{index}].template"
            if not isinstance(job, dict):
                raise OspreyBlockError(
                    [(f"spec.replicatedJobs[{index}]", "must be a mapping")], source="manifest"
                )
            job_spec = _mapping(_mapping(job, "template", where), "spec", f"{where}.spec")
            yield _mapping(job_spec, "template", f"{where}.spec.template"), f"{where}.spec.template"


def _containers(template: dict[str, Any], where: str) -> list[dict[str, Any]]:
    containers = _mapping(template, "spec", f"{where}.spec").get("containers") or []
    if not isinstance(containers, list) or not all(isinstance(item, dict) for item in containers):
        raise OspreyBlockError(
            [(f"{where}.spec.containers", "must be a list of containers")], source="manifest"
        )
    return containers


def _literal_env(container: dict[str, Any], where: str) -> dict[str, str]:
    """The container's literal environment; a contract key set through ``valueFrom`` is an error.

    A ``valueFrom`` value is only known in the cluster, so Osprey cannot check it against the block, and
    Kubernetes would let it win over the annotations Osprey writes: the two would describe different jobs.
    """
    env = container.get("env")
    if env is None:
        return {}
    if not isinstance(env, list) or not all(isinstance(item, dict) for item in env):
        raise _manifest_error(where, f"must be a list of {{'name', 'value'}} (got {type(env).__name__})")
    result: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for index, item in enumerate(env):
        name = item.get("name")
        if not isinstance(name, str) or not name:
            problems.append((f"{where}[{index}].name", "required: a non-empty string"))
        elif "valueFrom" in item:
            if name in ENVIRONMENT.keys:
                problems.append(
                    (
                        f"{where}[{index}] {name}",
                        "set with valueFrom, which Osprey cannot check against the block; "
                        "use a literal value or remove it and let the block set it",
                    )
                )
        else:
            # Kubernetes reads a missing value as the empty string; so does the contract check.
            result[name] = item.get("value", "")
    if problems:
        raise OspreyBlockError(problems, source="manifest")
    return result


def label_annotation_conflicts(
    labels: Mapping[str, Any], annotations: Mapping[str, Any], where: str
) -> list[tuple[str, str]]:
    """``osprey.aws/*`` keys that are both a label and an annotation with different values."""
    return [
        (f"{where} {key}", f"label {labels[key]!r} and annotation {value!r} disagree; keep one")
        for key, value in annotations.items()
        if key.startswith(KUBERNETES.prefix) and key in labels and labels[key] != value
    ]


def _manifest_error(where: str, message: str) -> OspreyBlockError:
    return OspreyBlockError([(where, message)], source="manifest")


# Kueue reads both names from labels, so each must be a label value; the objects they name
# (LocalQueue, WorkloadPriorityClass) are Kubernetes objects, whose names are DNS-1123 subdomains.
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE_MAX = 63


def _kueue_name_problem(value: str, what: str) -> str | None:
    if value.startswith("arn:"):
        return f"{value!r} is an AWS Batch job queue ARN, not a Kueue {what} name"
    if len(value) > _LABEL_VALUE_MAX or not _DNS1123_SUBDOMAIN.match(value):
        return (
            f"invalid {what} name {value!r}: it becomes a Kubernetes label value, so at most "
            f"{_LABEL_VALUE_MAX} characters of lowercase letters, digits, '-' and '.', starting and "
            "ending with a letter or digit"
        )
    return None


def _check_kueue_names(queue: str | None, priority_class: str | None) -> None:
    problems: list[tuple[str, str]] = []
    if queue is not None and (problem := _kueue_name_problem(queue, "LocalQueue")):
        problems.append(("osprey.queue", problem))
    if priority_class is not None:
        if not isinstance(priority_class, str):
            problems.append(("priority_class", f"must be a string (got {type(priority_class).__name__})"))
        elif problem := _kueue_name_problem(priority_class, "WorkloadPriorityClass"):
            problems.append(("priority_class", problem))
    if problems:
        raise OspreyBlockError(problems)


def _set_label(
    labels: dict[str, Any], key: str, value: str, where: str, problems: list[tuple[str, str]]
) -> None:
    current = labels.setdefault(key, value)
    if current != value:
        problems.append((f"{where} {key}", f"{current!r} contradicts {value!r}"))


def _runtime_env(name: str) -> list[dict[str, Any]]:
    return [
        {
            "name": RUNTIME_POD_NAMESPACE_VARIABLE,
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        },
        {"name": RUNTIME_POD_NAME_VARIABLE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        # $(VAR) expands variables defined earlier in the same list.
        {"name": RUNTIME_JOB_ID_VARIABLE, "value": f"$({RUNTIME_POD_NAMESPACE_VARIABLE})/{name}"},
    ]


def _min_parallelism(manifest: dict[str, Any], percent: int) -> int | None:
    parallelism = manifest["spec"].get("parallelism", 1)
    if not isinstance(parallelism, int) or isinstance(parallelism, bool):
        raise OspreyBlockError([("spec.parallelism", "must be an integer")], source="manifest")
    minimum = math.ceil(parallelism * percent / 100)
    return minimum if 1 <= minimum < parallelism else None


def _sources(
    labels: dict[str, Any], annotations: dict[str, Any], templates: list[tuple[dict[str, Any], str]]
) -> list[Source]:
    """What the manifest already says, each place a separate source so that any two must agree."""
    conflicts = label_annotation_conflicts(labels, annotations, "metadata")
    if conflicts:
        raise OspreyBlockError(conflicts, source="manifest")
    sources: list[Source] = [
        (KUBERNETES, dict(labels), "metadata.labels"),
        (KUBERNETES, dict(annotations), "metadata.annotations"),
    ]
    for template, where in templates:
        pod_labels = _mapping(
            _mapping(template, "metadata", f"{where}.metadata"), "labels", f"{where}.metadata.labels"
        )
        sources.append((KUBERNETES, dict(pod_labels), f"{where}.metadata.labels"))
        for index, container in enumerate(_containers(template, where)):
            env_where = f"{where}.spec.containers[{index}].env"
            sources.append((ENVIRONMENT, _literal_env(container, env_where), env_where))
    return sources


def annotate(
    manifest: Mapping[str, Any], *, priority_class: str | None = None, **block: Any
) -> dict[str, Any]:
    """A copy of ``manifest`` carrying the ``osprey`` block (see the module docstring for what is added)."""
    parsed = parse_block(block, path="osprey")
    if parsed.share_identifier is not None:
        raise OspreyBlockError(
            [("osprey.share_identifier", "applies to AWS Batch only, not to EKS manifests")]
        )
    _check_kueue_names(parsed.queue, priority_class)
    if not isinstance(manifest, Mapping):
        raise OspreyBlockError([("manifest", "must be a mapping (one Kubernetes object)")], source="manifest")
    result = copy.deepcopy(dict(manifest))
    api_kind = (result.get("apiVersion"), result.get("kind"))
    kind = SUPPORTED_KINDS.get((str(api_kind[0]), str(api_kind[1])))
    if kind is None:
        allowed = ", ".join(f"{api} {name}" for api, name in SUPPORTED_KINDS)
        raise OspreyBlockError(
            [("apiVersion/kind", f"unsupported {api_kind[0]} {api_kind[1]}; supported: {allowed}")],
            source="manifest",
        )
    metadata = _mapping(result, "metadata", "metadata")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise OspreyBlockError([("metadata.name", "required: the job's name")], source="manifest")
    labels = _mapping(metadata, "labels", "metadata.labels")
    annotations = _mapping(metadata, "annotations", "metadata.annotations")

    templates = list(_pod_templates(result, kind))
    effective = merge_block(parsed, *_sources(labels, annotations, templates), path="osprey")

    problems: list[tuple[str, str]] = []
    osprey_labels, osprey_annotations = to_kubernetes(effective)
    for key, value in osprey_labels.items():
        _set_label(labels, key, value, "metadata.labels", problems)
    for key, value in osprey_annotations.items():
        _set_label(annotations, key, value, "metadata.annotations", problems)
    if effective.queue is not None:
        _set_label(labels, KUEUE_QUEUE_NAME, effective.queue, "metadata.labels", problems)
    if priority_class is not None:
        _set_label(labels, KUEUE_PRIORITY_CLASS, priority_class, "metadata.labels", problems)
    if kind == "job" and effective.required_min_workers is not None:
        minimum = _min_parallelism(result, effective.required_min_workers)
        if minimum is not None:
            _set_label(annotations, KUEUE_MIN_PARALLELISM, str(minimum), "metadata.annotations", problems)

    environment = to_environment(effective)
    for template, where in templates:
        pod_labels = template["metadata"]["labels"]
        for key, value in osprey_labels.items():
            _set_label(pod_labels, key, value, f"{where}.metadata.labels", problems)
        for container in _containers(template, where):
            env = container.setdefault("env", [])
            present = {item.get("name") for item in env}
            additions = [{"name": key, "value": value} for key, value in environment.items()]
            additions += _runtime_env(name)
            env.extend(item for item in additions if item["name"] not in present)
    if problems:
        raise OspreyBlockError(problems, source="manifest")
    if not annotations:
        del metadata["annotations"]
    return result
