"""The EKS bearer token: a presigned STS GetCallerIdentity URL that signs the cluster name."""

from __future__ import annotations

import base64
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from botocore.stub import Stubber

from osprey_control.backends.eks import TokenProvider, connect, describe_cluster, presigned_token
from osprey_control.backends.eks.token import TOKEN_PREFIX
from osprey_control.errors import TransientError


def _decode(token: str) -> str:
    assert token.startswith(TOKEN_PREFIX)
    body = token[len(TOKEN_PREFIX) :]
    assert "=" not in body
    assert "+" not in body
    assert "/" not in body
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def test_token_is_a_presigned_get_caller_identity_url_signing_the_cluster_name() -> None:
    # Given fake credentials and a plain STS client (presigning never touches the network)
    sts = boto3.client("sts", region_name="us-east-1")
    # When a token is minted for a cluster
    token = presigned_token("gpu-cluster", sts)
    # Then it decodes to a 60 s presigned GetCallerIdentity URL with x-k8s-aws-id among the signed headers
    url = urlsplit(_decode(token))
    query = {key: values[0] for key, values in parse_qs(url.query).items()}
    assert url.scheme == "https"
    assert url.hostname is not None
    assert url.hostname.startswith("sts.")
    assert query["Action"] == "GetCallerIdentity"
    assert query["Version"] == "2011-06-15"
    assert query["X-Amz-Expires"] == "60"
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"].split(";")
    assert "X-Amz-Signature" in query
    assert "OspreyClusterName" not in query  # the helper parameter never leaks into the URL


def test_the_cluster_name_is_signed_so_tokens_differ_per_cluster() -> None:
    # Given one STS client shared by two clusters
    sts = boto3.client("sts", region_name="us-east-1")
    # When tokens are minted for both, twice
    first, second = presigned_token("a", sts), presigned_token("b", sts)
    # Then the signatures differ (the header value is part of the signature)
    sig = [parse_qs(urlsplit(_decode(t)).query)["X-Amz-Signature"][0] for t in (first, second)]
    assert sig[0] != sig[1]


def test_provider_caches_until_shortly_before_expiry_and_can_be_invalidated() -> None:
    # Given a provider on a controllable clock with a 14-minute lifetime and a 60 s margin
    now = [1000.0]
    provider = TokenProvider(
        "gpu-cluster", boto3.client("sts", region_name="us-east-1"), clock=lambda: now[0]
    )
    first = provider()
    # When time passes but stays within lifetime - margin
    now[0] += 14 * 60 - 61
    # Then the same token is served
    assert provider() is first
    # When time reaches the refresh point, or the token is invalidated, a new one is minted
    now[0] += 2
    refreshed = provider()
    assert _decode(refreshed).startswith("https://sts.")
    provider.invalidate()
    assert provider() is not refreshed


def test_margin_must_be_shorter_than_lifetime() -> None:
    with pytest.raises(ValueError, match="shorter than the token lifetime"):
        TokenProvider("c", lifetime=60, margin=60)


def test_describe_cluster_reads_endpoint_and_ca_and_connect_builds_a_client() -> None:
    # Given DescribeCluster answering an endpoint and a base64 CA
    eks = boto3.client("eks", region_name="us-east-1")
    ca_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    answer = {"cluster": {"name": "gpu", "endpoint": "https://ABC.gr7.us-east-1.eks.amazonaws.com",
                          "certificateAuthority": {"data": base64.b64encode(ca_pem.encode()).decode()}}}  # fmt: skip
    with Stubber(eks) as stub:
        stub.add_response("describe_cluster", answer, {"name": "gpu"})
        # When it is described
        endpoint = describe_cluster("gpu", eks)
    # Then the endpoint and PEM text come back
    assert endpoint.endpoint == "https://ABC.gr7.us-east-1.eks.amazonaws.com"
    assert endpoint.certificate_authority == ca_pem
    # And a cluster without an endpoint yet gives an actionable error, worth retrying next cycle
    with Stubber(eks) as stub:
        stub.add_response(
            "describe_cluster", {"cluster": {"name": "new", "status": "CREATING"}}, {"name": "new"}
        )
        with pytest.raises(TransientError, match="wait until it is ACTIVE"):
            connect("new", eks_client=eks)
