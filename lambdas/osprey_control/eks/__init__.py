"""EKS adapter: bearer token, a small Kubernetes REST client, job discovery and the priority applier.

Standard library HTTP only (no ``kubernetes`` package, no kubeconfig); boto3 clients are passed in. See
docs/eks.md for the access entry, RBAC and Kueue priority semantics.
"""

from osprey_control.eks.applier import (
    DEFAULT_PRIORITY_RANGE,
    ApplyOutcome,
    ApplyReport,
    ApplyResult,
    EksPriorityApplier,
    PriorityRange,
    PriorityTarget,
)
from osprey_control.eks.client import (
    ConflictError,
    KubernetesApiError,
    KubernetesClient,
    KubernetesRejectedError,
    KubernetesUnavailableError,
    NotFoundError,
    UnauthorizedError,
)
from osprey_control.eks.discovery import (
    DiscoveryProblem,
    DiscoveryResult,
    EksObservation,
    WorkloadRef,
    discover,
)
from osprey_control.eks.token import ClusterEndpoint, TokenProvider, describe_cluster, presigned_token

__all__ = [
    "DEFAULT_PRIORITY_RANGE",
    "ApplyOutcome",
    "ApplyReport",
    "ApplyResult",
    "ClusterEndpoint",
    "ConflictError",
    "DiscoveryProblem",
    "DiscoveryResult",
    "EksObservation",
    "EksPriorityApplier",
    "KubernetesApiError",
    "KubernetesClient",
    "KubernetesRejectedError",
    "KubernetesUnavailableError",
    "NotFoundError",
    "PriorityRange",
    "PriorityTarget",
    "TokenProvider",
    "UnauthorizedError",
    "WorkloadRef",
    "connect",
    "describe_cluster",
    "discover",
    "presigned_token",
]


def connect(cluster_name: str, *, eks_client: object = None, sts_client: object = None) -> KubernetesClient:
    """A client for EKS cluster ``cluster_name``: endpoint and CA from DescribeCluster, an IAM token."""
    endpoint = describe_cluster(cluster_name, eks_client)
    tokens = TokenProvider(cluster_name, sts_client)
    return KubernetesClient(
        endpoint.endpoint,
        token=tokens,
        ca_pem=endpoint.certificate_authority,
        on_unauthorized=tokens.invalidate,
    )
