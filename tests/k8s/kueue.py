"""What the Kueue manager needs to run outside a cluster: its Configuration, a kubeconfig, its CRDs with the
conversion webhook on loopback, and its admission webhooks on loopback.

Upstream installs Kueue with kustomize: the webhooks point at the in-cluster Service ``webhook-service``
and Kueue's internal cert management writes the serving certificate into a Secret and the CA into the
webhook configurations. Neither fits a manager that runs as a process on 127.0.0.1 (no Service, no kubelet
to mount a Secret), so the fixture turns internal cert management off, gives the manager a certificate from
its own CA (:mod:`tests.k8s.pki`) and rewrites every ``clientConfig`` from ``service`` to
``url: https://127.0.0.1:<port><path>`` with that CA as ``caBundle``.

Only the webhooks of Kueue's own types and of the job kinds Osprey manages (``batch/v1`` Job, PyTorchJob,
JobSet: :data:`FRAMEWORKS`) are installed: the manager registers the handler of a framework only when the
framework is enabled (``integrations.frameworks``), and a webhook whose path the server does not serve answers
404, which with ``failurePolicy: Fail`` would refuse every Pod, Deployment or StatefulSet of the cluster.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "CONVERTED_CRDS",
    "FRAMEWORKS",
    "crds",
    "kubeconfig",
    "manager_configuration",
    "webhook_configurations",
]

# The CRDs whose kustomization (config/components/crd/kustomization.yaml) enables the conversion webhook.
CONVERTED_CRDS = frozenset(
    {"localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"}
)  # fmt: skip
# Kueue's integrations for the three job kinds Osprey discovers (backends/eks/resources.py JOB_KINDS); the CRDs
# of the last two come from .ci/k8s (the training-operator's and JobSet's modules, no operator runs).
FRAMEWORKS = ("batch/job", "kubeflow.org/pytorchjob", "jobset.x-k8s.io/jobset")
_KEPT_PATH_PARTS = (
    "-kueue-x-k8s-io-",
    "-batch-v1-job",
    "-kubeflow-org-v1-pytorchjob",
    "-jobset-x-k8s-io-v1alpha2-jobset",
)


# libyaml's loader when PyYAML has it: the CRDs are ~3 MB of YAML, which the pure-Python loader takes ~15 s to
# read on this machine (libyaml: under half a second), most of the fixture's start-up.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _documents(path: Path) -> list[Any]:
    return list(yaml.load_all(path.read_text(), Loader=_LOADER))


def _url(port: int, path: str) -> str:
    return f"https://127.0.0.1:{port}{path}"


def crds(directory: Path, *, webhook_port: int | None, ca_pem: str) -> list[dict[str, Any]]:
    """Kueue's CRDs (``crds/*.yaml`` of the cache); with ``webhook_port`` the converted ones call the
    manager's ``/convert`` on loopback (without it, no manager runs, and the server keeps the stored version's
    fields under each served version: enough for tests that use one version)."""
    found = []
    for path in sorted(directory.glob("*.yaml")):
        for document in _documents(path):
            if not document:
                continue
            plural = document["spec"]["names"]["plural"]
            if webhook_port is not None and plural in CONVERTED_CRDS:
                document["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {
                            "url": _url(webhook_port, "/convert"),
                            "caBundle": base64.b64encode(ca_pem.encode()).decode(),
                        },
                        "conversionReviewVersions": ["v1"],
                    },
                }
            found.append(document)
    return found


def webhook_configurations(manifest: Path, *, port: int, ca_pem: str) -> list[dict[str, Any]]:
    """The Mutating- and ValidatingWebhookConfiguration of ``manifest`` (Kueue's
    ``config/components/webhook/manifests.yaml``), pointed at ``https://127.0.0.1:port`` and cut to the
    webhooks the manager serves (module docstring)."""
    bundle = base64.b64encode(ca_pem.encode()).decode()
    configurations = []
    for document in _documents(manifest):
        if not document or document.get("kind") not in (
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ):
            continue
        configuration = copy.deepcopy(document)
        # kustomize's namePrefix (config/default) would make these kueue-...; the same name keeps them apart
        # from anything else a test installs.
        configuration["metadata"] = {"name": "kueue-" + document["metadata"]["name"]}
        kept = []
        for webhook in configuration.get("webhooks") or []:
            path = webhook["clientConfig"]["service"]["path"]
            if not any(part in path for part in _KEPT_PATH_PARTS):
                continue
            webhook["clientConfig"] = {"url": _url(port, path), "caBundle": bundle}
            kept.append(webhook)
        configuration["webhooks"] = kept
        configurations.append(configuration)
    return configurations


def manager_configuration(
    *, namespace: str, webhook_port: int, health_port: int, cert_dir: Path, frameworks: Iterable[str]
) -> dict[str, Any]:
    """Kueue's ``config.kueue.x-k8s.io/v1beta2`` Configuration for a manager on loopback.

    ``waitForPodsReady`` is on (the gang semantics Osprey's gang watch relies on: an admitted Workload whose
    pods are not all ready within the timeout is evicted and requeued); the queueing strategy
    (BestEffortFIFO) and ``withinClusterQueue`` preemption are ClusterQueue settings, made by the tests'
    queues. Visibility on demand is off: it starts an aggregated API server that needs an APIService and
    the kube-system authentication ConfigMap, which this API server has no use for. The metrics endpoint is
    off (``"0"``); leader election is off (one manager).
    """
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": namespace,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "waitForPodsReady": {
            "timeout": "5m",
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 1, "backoffMaxSeconds": 5},
        },
        "integrations": {
            "frameworks": list(frameworks),
            # docs/eks.md: Kueue copies the opt-in label onto the Workload, which discovery selects on.
            "labelKeysToCopy": ["osprey.aws/enabled"],
        },
        "featureGates": {"VisibilityOnDemand": False},
    }


def kubeconfig(server: str, ca_file: Path, token: str) -> dict[str, Any]:
    """A kubeconfig for ``server`` trusting ``ca_file`` and authenticating with a bearer ``token``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": "user", "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
        "current-context": "local",
    }
