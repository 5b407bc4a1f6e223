"""EKS API authentication without kubeconfig or the AWS CLI: the cluster endpoint and an IAM bearer token.

EKS authenticates an IAM principal by a presigned STS ``GetCallerIdentity`` URL: the API server's
authenticator replays it against STS and learns who signed it. The URL must sign the header
``x-k8s-aws-id: <cluster name>`` so that a token minted for one cluster cannot be replayed against another.
The token is ``k8s-aws-v1.`` followed by the URL in unpadded base64url.

The URL is signed with ``X-Amz-Expires=60`` (what the authenticator expects) but EKS accepts the token for
15 minutes after its signing time; ``aws eks get-token`` reports 14 minutes. :class:`TokenProvider` caches a
token for :data:`TOKEN_LIFETIME` seconds minus :data:`REFRESH_MARGIN`, and the Kubernetes client asks for a
fresh one when the API server answers 401.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from osprey_control.aws import client_for
from osprey_control.errors import TransientError, classified

__all__ = ["ClusterEndpoint", "TokenProvider", "describe_cluster", "presigned_token"]

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
PRESIGN_EXPIRES = 60
TOKEN_LIFETIME = 14 * 60
REFRESH_MARGIN = 60

# botocore validates Params against the STS model, which has no cluster field: the name travels in the
# request context instead, from provide-client-params (before validation) to before-sign (before signing).
_CONTEXT_KEY = "osprey_k8s_aws_id"
_PARAM = "OspreyClusterName"
_HANDLER_ID = "osprey-eks-token"


@dataclass(frozen=True)
class ClusterEndpoint:
    """Where a cluster's API server is and the CA that signs its serving certificate (PEM text)."""

    name: str
    endpoint: str
    certificate_authority: str | None


def describe_cluster(name: str, eks_client: Any = None) -> ClusterEndpoint:
    """The API endpoint and CA of EKS cluster ``name`` (``eks:DescribeCluster``)."""
    with classified():
        cluster = client_for("eks", eks_client).describe_cluster(name=name)["cluster"]
    endpoint = cluster.get("endpoint")
    if not endpoint:
        status = cluster.get("status", "unknown")
        # A cluster being created gets its endpoint within minutes: the next cycle may find it.
        raise TransientError(
            f"EKS cluster {name!r} has no API endpoint yet (status {status}); wait until it is ACTIVE"
        )
    ca_data = (cluster.get("certificateAuthority") or {}).get("data")
    ca_pem = base64.b64decode(ca_data).decode("ascii") if ca_data else None
    return ClusterEndpoint(name=name, endpoint=str(endpoint), certificate_authority=ca_pem)


def _take_cluster_name(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    name = params.pop(_PARAM, None)
    if name is not None:
        context[_CONTEXT_KEY] = name


def _sign_cluster_header(request: Any, **_: Any) -> None:
    name = request.context.get(_CONTEXT_KEY)
    if name is not None:
        request.headers[CLUSTER_ID_HEADER] = name


def _register(sts_client: Any) -> None:
    events = sts_client.meta.events
    # unique_id makes registration idempotent when one STS client serves many clusters.
    events.register(
        "provide-client-params.sts.GetCallerIdentity", _take_cluster_name, unique_id=f"{_HANDLER_ID}-params"
    )
    events.register(
        "before-sign.sts.GetCallerIdentity", _sign_cluster_header, unique_id=f"{_HANDLER_ID}-sign"
    )


def presigned_token(cluster_name: str, sts_client: Any = None) -> str:
    """A fresh bearer token for ``cluster_name``, signed with the STS client's credentials (no network)."""
    sts = client_for("sts", sts_client)
    _register(sts)
    url: str = sts.generate_presigned_url(
        "get_caller_identity",
        Params={_PARAM: cluster_name},
        ExpiresIn=PRESIGN_EXPIRES,
        HttpMethod="GET",
    )
    encoded = base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")
    return TOKEN_PREFIX + encoded


class TokenProvider:
    """A cached token for one cluster; thread-safe, refreshed ``margin`` seconds before it lapses."""

    def __init__(
        self,
        cluster_name: str,
        sts_client: Any = None,
        *,
        lifetime: float = TOKEN_LIFETIME,
        margin: float = REFRESH_MARGIN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if margin >= lifetime:
            raise ValueError(f"refresh margin {margin}s must be shorter than the token lifetime {lifetime}s")
        self.cluster_name = cluster_name
        self._sts_client = sts_client
        self._lifetime = lifetime
        self._margin = margin
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._valid_until = 0.0

    def __call__(self) -> str:
        with self._lock:
            now = self._clock()
            if self._token is None or now >= self._valid_until:
                self._sts_client = client_for("sts", self._sts_client)
                self._token = presigned_token(self.cluster_name, self._sts_client)
                self._valid_until = now + self._lifetime - self._margin
            return self._token

    def invalidate(self) -> None:
        """Forget the cached token (the API server rejected it: clock skew or rotated credentials)."""
        with self._lock:
            self._token = None
