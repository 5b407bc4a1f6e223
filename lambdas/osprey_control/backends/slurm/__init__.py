"""Slurm (backend ``slurm``: AWS ParallelCluster, SageMaker HyperPod Slurm): slurmrestd client, JWT credentials
from Secrets Manager, discovery of jobs carrying the Osprey marker, node → EC2 instance mapping, the priority
applier, gang readiness, and the ``job_submit.lua`` that starts new opted-in jobs mid-range (:mod:`.submit_plugin`). Standard library HTTP only; boto3 clients are passed in. See docs/slurm.md.

slurmrestd is reachable only inside the cluster's VPC, so the control plane reaches it through the bridge
function (:mod:`.bridge`): the apply step's applier and the gang watch's gang invoke it; discovery runs in it.
"""

from __future__ import annotations

from dataclasses import dataclass

from osprey_control.backends.actuation import Applier
from osprey_control.backends.driver import Deployment
from osprey_control.backends.runtime_naming import RuntimeNames
from osprey_control.backends.slurm.applier import (
    DEFAULT_SLURM_PRIORITY_RANGE,
    START_PRIORITY,
    SlurmApplier,
    SlurmPriorityRange,
)
from osprey_control.backends.slurm.bridge import (
    BridgeSettings,
    SlurmBridgeApplier,
    SlurmBridgeGang,
    run_apply,
    run_discovery,
    run_gang,
)
from osprey_control.backends.slurm.client import (
    API_VERSION,
    MAX_RESPONSE_BYTES,
    SlurmApiError,
    SlurmClient,
    SlurmCredentials,
    SlurmRejectedError,
    SlurmUnavailableError,
    raise_for_errors,
)
from osprey_control.backends.slurm.discovery import (
    SlurmDiscovery,
    SlurmDiscoveryProblem,
    SlurmObservation,
    discover,
    native_id,
    parse_native_id,
)
from osprey_control.backends.slurm.gang import SlurmGang, slurm_readiness
from osprey_control.backends.slurm.instances import Ec2InstanceMap, Instance, InstanceMap, StaticInstanceMap
from osprey_control.backends.slurm.marker import block_from_comment, comment_with_marker, marker
from osprey_control.backends.slurm.submit_plugin import install_script, job_submit_lua
from osprey_control.backends.slurm.token import SecretCredentials, mint_token, parse_secret
from osprey_control.gang import GangBackend, WatchJob
from osprey_control.registry import Backend, JobRecord, slurm_job_id
from osprey_control.wiring import SLURM_BRIDGE_FUNCTION_VARIABLE

__all__ = [
    "API_VERSION",
    "DEFAULT_SLURM_PRIORITY_RANGE",
    "DRIVER",
    "MAX_RESPONSE_BYTES",
    "START_PRIORITY",
    "BridgeSettings",
    "Ec2InstanceMap",
    "Instance",
    "InstanceMap",
    "SecretCredentials",
    "SlurmApiError",
    "SlurmApplier",
    "SlurmBridgeApplier",
    "SlurmBridgeGang",
    "SlurmClient",
    "SlurmCredentials",
    "SlurmDiscovery",
    "SlurmDiscoveryProblem",
    "SlurmGang",
    "SlurmObservation",
    "SlurmPriorityRange",
    "SlurmRejectedError",
    "SlurmUnavailableError",
    "StaticInstanceMap",
    "block_from_comment",
    "comment_with_marker",
    "discover",
    "install_script",
    "job_submit_lua",
    "marker",
    "mint_token",
    "native_id",
    "parse_native_id",
    "parse_secret",
    "raise_for_errors",
    "run_apply",
    "run_discovery",
    "run_gang",
    "slurm_readiness",
]


@dataclass(frozen=True, slots=True)
class _SlurmRuntimeNames(RuntimeNames):
    """The in-job runtime names a Slurm job ``<cluster>/<job id>`` (``SLURM_CLUSTER_NAME``, ``SLURM_JOB_ID``):
    its registry id without the incarnation (registry.identity)."""

    def job_id(self, record: JobRecord) -> str:
        try:
            return slurm_job_id(record.native_id).scheduler_id
        except ValueError:
            return record.native_id


class _SlurmDriver:
    backend = Backend.SLURM
    recognition = "discovery"
    # How the in-job runtime names its jobs and hosts (the collector queries those names).
    runtime = _SlurmRuntimeNames("slurm")

    def applier(self, deployment: Deployment) -> Applier | None:
        # Only when the deployment has a bridge in the cluster's VPC (its name in the apply function's environment).
        name = deployment.environment.get(SLURM_BRIDGE_FUNCTION_VARIABLE, "").strip()
        return SlurmBridgeApplier(name, client=deployment.client("lambda")) if name else None

    def gang(self, job: WatchJob, deployment: Deployment) -> GangBackend:
        name = deployment.environment.get(SLURM_BRIDGE_FUNCTION_VARIABLE, "").strip()
        if not name:
            raise ValueError(f"Slurm gang {job.native_id}: no Slurm bridge function is deployed to reach it")
        return SlurmBridgeGang(name, job.native_id, client=deployment.client("lambda"))


DRIVER = _SlurmDriver()
