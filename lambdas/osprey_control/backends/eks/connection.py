"""Clients for EKS clusters: endpoint and CA from DescribeCluster, an IAM bearer token, one client per cluster
per warm container (its token cache lives in the client)."""

from __future__ import annotations

from osprey_control.backends.eks.client import KubernetesClient
from osprey_control.backends.eks.token import TokenProvider, describe_cluster

__all__ = ["ClientCache", "cached_connect", "connect"]


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


class ClientCache:
    """One client per cluster per warm container (its token cache lives in the client). ``cache_clear`` makes
    it look like ``functools.cache`` to whoever resets a container's caches (``osprey local`` redeploying)."""

    def __init__(self) -> None:
        self._clients: dict[str, KubernetesClient] = {}

    def __call__(self, cluster: str) -> KubernetesClient:
        if cluster not in self._clients:
            self._clients[cluster] = connect(cluster)
        return self._clients[cluster]

    def forget(self, cluster: str) -> None:
        self._clients.pop(cluster, None)

    def cache_clear(self) -> None:
        self._clients.clear()


cached_connect = ClientCache()
