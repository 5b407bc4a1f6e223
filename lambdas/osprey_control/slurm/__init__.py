"""Slurm adapter (AWS ParallelCluster, SageMaker HyperPod Slurm): slurmrestd client, JWT credentials from
Secrets Manager, discovery of jobs carrying the Osprey marker, node → EC2 instance mapping, the priority
applier and gang readiness. Standard library HTTP only; boto3 clients are passed in. See docs/slurm.md.
"""

from osprey_control.slurm.applier import DEFAULT_PRIORITY_RANGE, PriorityRange, SlurmApplier
from osprey_control.slurm.client import (
    API_VERSION,
    SlurmApiError,
    SlurmClient,
    SlurmCredentials,
    SlurmRejectedError,
    SlurmUnavailableError,
    raise_for_errors,
)
from osprey_control.slurm.discovery import (
    DiscoveryProblem,
    SlurmDiscovery,
    SlurmObservation,
    discover,
    native_id,
    parse_native_id,
)
from osprey_control.slurm.gang import SlurmGang, slurm_readiness
from osprey_control.slurm.instances import Ec2InstanceMap, Instance, InstanceMap, StaticInstanceMap
from osprey_control.slurm.marker import block_from_comment, comment_with_marker, marker
from osprey_control.slurm.token import SecretCredentials, mint_token, parse_secret

__all__ = [
    "API_VERSION",
    "DEFAULT_PRIORITY_RANGE",
    "DiscoveryProblem",
    "Ec2InstanceMap",
    "Instance",
    "InstanceMap",
    "PriorityRange",
    "SecretCredentials",
    "SlurmApiError",
    "SlurmApplier",
    "SlurmClient",
    "SlurmCredentials",
    "SlurmDiscovery",
    "SlurmGang",
    "SlurmObservation",
    "SlurmRejectedError",
    "SlurmUnavailableError",
    "StaticInstanceMap",
    "block_from_comment",
    "comment_with_marker",
    "discover",
    "marker",
    "mint_token",
    "native_id",
    "parse_native_id",
    "parse_secret",
    "raise_for_errors",
    "slurm_readiness",
]
