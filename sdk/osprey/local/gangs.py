"""``osprey local``'s gangs: two co-scheduled Kueue Jobs on the local EKS cluster, and their gang watches.

Both ask for all of their 4 pods (``required_min_workers: 100``) within a short ``gang_timeout``
(:data:`GANG_TIMEOUT_SECONDS`, ``osprey local up --gang-timeout``): ``ddp-eks``'s pods turn Ready one by one
during the first half of the timeout, so its gang forms (``ready``); ``moe-eks`` gets 3 of 4 (the last pod
stays unschedulable), times out, and runs on with the policy's fallback, ``serial`` (training-policy's
default): the outcome is final at the timeout. ``requeue`` would suspend the job and wait a fixed 60 s
back-off before each retry, longer than the whole demo, and is covered by the moto-executed state machine
tests (tests/control/gang/test_state_machine.py).

The watches start through the real path: the EKS discovery reads the jobs from the cluster's Kubernetes API,
the registry merges the observations, and the ingest step's :class:`osprey_control.gang.GangRegistrar`
starts one execution of the deployed gang watch state machine (``gangStateMachineArn`` in ``/osprey/config``)
per job. Nothing here sends EventBridge events: moto cannot deliver them. The watch's Wait states wait real
seconds in moto's interpreter, which is why the timeout is short.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from osprey.local.kubernetes import LocalKubernetes
from osprey_control.contract import ENABLED_KUBERNETES, parse_block, to_kubernetes

__all__ = ["GANG_TIMEOUT_SECONDS", "gang_lines"]

logger = logging.getLogger(__name__)
ClientFactory = Callable[[str], Any]
# Short enough that the README demo's six cycles (a second or two each) show both outcomes; the watch then
# polls every min(10 s, ceil(timeout / 6)) = 2 s (docs/gangs.md).
GANG_TIMEOUT_SECONDS = 8
GANG_WORKERS = 4


def kubernetes_gang(
    kubernetes: LocalKubernetes,
    *,
    label: str,
    namespace: str,
    policy: str,
    workers: int,
    ready: int,
    timeout: int,
    kueue_api: str,
) -> str:
    """A Kueue-managed ``batch/v1`` Job of ``workers`` Pending pods with the block ``co_schedule: true``,
    ``gang_timeout: timeout``, ``required_min_workers: 100``; those past the first ``ready`` are unschedulable
    (:func:`schedule_ready` turns the others Ready). Returns the first pod's name (its metrics are published)."""
    block = parse_block(
        {
            "priority_derivation_profile": policy,
            "co_schedule": True,
            "gang_timeout": timeout,
            "required_min_workers": 100,
        }
    )
    labels, annotations = to_kubernetes(block)
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    created = kubernetes.add("batch/v1", "jobs", {
        "kind": "Job",
        "metadata": {"name": label, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {"suspend": False, "parallelism": workers, "completions": workers},
        "status": {"active": workers, "ready": 0, "startTime": started},
    })  # fmt: skip
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": label,
             "uid": created["metadata"]["uid"], "controller": True}  # fmt: skip
    kubernetes.add(kueue_api, "workloads", {
        "kind": "Workload",
        # Kueue's labelKeysToCopy: ["osprey.aws/enabled"] (docs/eks.md): discovery lists Workloads by it.
        "metadata": {"name": f"job-{label}", "namespace": namespace, "ownerReferences": [owner],
                     "labels": {ENABLED_KUBERNETES: "true"}},
        "spec": {"queueName": "gpu", "podSets": [], "priority": 500},
        "status": {"conditions": [{"type": "Admitted", "status": "True",
                                   "lastTransitionTime": "2026-01-01T00:01:00Z"}]},
    })  # fmt: skip
    for index in range(workers):
        pod = f"{label}-{index}"
        conditions: list[dict[str, str]] = [{"type": "Ready", "status": "False"}]
        if index >= ready:
            conditions.append(
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}
            )  # fmt: skip
        kubernetes.add("v1", "pods", {
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": namespace,
                         "labels": {**labels, "batch.kubernetes.io/job-name": label}},
            "status": {"phase": "Pending", "conditions": conditions},
        })  # fmt: skip
    return f"{label}-0"


def schedule_ready(kubernetes: LocalKubernetes, namespace: str, label: str, ready: int, timeout: int) -> None:
    """Pods ``<label>-0 .. <label>-<ready-1>`` turn Ready one by one over the first half of ``timeout``.

    Called once the watches have started: the discovery counts a Job with a Ready pod as running, and the
    ingest step starts watches only for jobs still pending or starting."""
    now = time.monotonic()
    for index in range(ready):
        kubernetes.ready_at(namespace, f"{label}-{index}", now + (index + 1) * timeout / (2 * ready))


def start_watches(
    client: ClientFactory, config: Mapping[str, Any], cluster: str, names: Iterable[str]
) -> list[str]:
    """Register the Jobs ``names`` of ``cluster`` as the EKS discovery sees them and start their gang watches
    with the ingest step's :class:`~osprey_control.gang.GangRegistrar`; returns the jobs whose watch started."""
    from osprey_control.backends.eks import (  # noqa: PLC0415
        connect,
        discover,
    )
    from osprey_control.policy_store import PolicySource  # noqa: PLC0415 - AWS SDK only when up
    from osprey_control.registry import JobRegistry  # noqa: PLC0415
    from osprey_control.steps.gang_start import GangRegistrar  # noqa: PLC0415

    wanted = set(names)
    registry = JobRegistry(
        str(config["tableName"]), client=client("dynamodb"), shards=int(config["registryShards"])
    )
    registrar = GangRegistrar(
        str(config["gangStateMachineArn"]),
        PolicySource(str(config["policyPrefix"]), client=client("ssm")),
        client=client("stepfunctions"),
    )
    kubernetes = connect(cluster, eks_client=client("eks"), sts_client=client("sts"))
    started: list[str] = []
    for observation in discover(kubernetes, cluster).observations:
        if observation.name not in wanted:
            continue  # the other EKS jobs are registered by the first cycle's discovery step, as in AWS
        result = registry.apply_observation(observation.to_observation())
        # What the ingest step does with every changed record (Ingestor's on_change).
        if result.changed and registrar(result.record):
            started.append(observation.name)
    logger.info("gang watches started", extra={"jobs": started})
    return sorted(started)


def gang_lines(decisions: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per job with a gang watch, for the cycle and status tables: outcome, wait, reason."""
    lines = []
    for item in decisions:
        gang = item.get("gang")
        if not gang:
            continue
        attempt = f", attempt {gang['attempt']}" if gang["attempt"] > 1 else ""
        reason = f" - {gang['reason']}" if gang.get("reason") else ""
        lines.append(f"gang {item['job']}: {gang['summary']}{attempt}{reason}")
    return lines
