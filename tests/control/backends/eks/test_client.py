"""The Kubernetes REST client: retries, typed errors, the bearer token, and where plain http is allowed."""

from __future__ import annotations

import pytest

from osprey_control.backends.eks import (
    AdmissionDeniedError,
    ConflictError,
    KubernetesApiError,
    KubernetesClient,
    KubernetesRejectedError,
    KubernetesUnavailableError,
    NotFoundError,
    UnauthorizedError,
)
from osprey_control.errors import PermanentError, TransientError
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import add_job

JOBS = "/apis/batch/v1/jobs"


def test_429_and_5xx_are_retried_with_backoff(fake_k8s: FakeKubernetes) -> None:
    # Given a list that fails with 429 then 503 before succeeding
    add_job(fake_k8s, "train")
    fake_k8s.fail("GET", JOBS, 429)
    fake_k8s.fail("GET", JOBS, 503)
    delays: list[float] = []
    client = KubernetesClient(fake_k8s.url, max_attempts=4, backoff=0.1, sleep=delays.append)
    # When it is listed
    items = list(client.list(JOBS, label_selector="osprey.aws/enabled=true"))
    # Then it succeeds on the third attempt after two bounded, jittered sleeps
    assert [item["metadata"]["name"] for item in items] == ["train"]
    assert len(delays) == 2
    assert all(0 <= delay <= 0.2 for delay in delays)


def test_retries_are_bounded_and_client_errors_are_not_retried(fake_k8s: FakeKubernetes) -> None:
    fake_k8s.fail("GET", JOBS, 500, times=10)
    client = KubernetesClient(fake_k8s.url, max_attempts=3, backoff=0, sleep=lambda _: None)
    with pytest.raises(KubernetesApiError, match="HTTP 500") as raised:
        client.get(JOBS)
    assert raised.value.status == 500
    assert fake_k8s.requests.count(("GET", JOBS)) == 3
    with pytest.raises(NotFoundError):
        client.get("/apis/batch/v1/namespaces/ml/jobs/nope")
    assert fake_k8s.requests.count(("GET", "/apis/batch/v1/namespaces/ml/jobs/nope")) == 1


def test_the_bearer_token_is_sent_and_a_401_mints_a_new_one_once(fake_k8s: FakeKubernetes) -> None:
    # Given a server that accepts only "good", and a token source whose first token is stale
    fake_k8s.token = "good"
    tokens = iter(["stale", "good"])
    current = [next(tokens)]
    client = KubernetesClient(
        fake_k8s.url, token=lambda: current[0], on_unauthorized=lambda: current.__setitem__(0, next(tokens))
    )
    # When a request is made, Then the 401 triggers one refresh and the retry succeeds
    assert client.get("/apis/kueue.x-k8s.io")["kind"] == "APIGroup"
    # And a token that stays wrong surfaces as an actionable error
    fake_k8s.token = "other"
    with pytest.raises(UnauthorizedError, match="access entry"):
        KubernetesClient(fake_k8s.url, token=lambda: "good").get("/apis/kueue.x-k8s.io")


def test_plain_http_is_refused_except_for_loopback() -> None:
    with pytest.raises(ValueError, match="refusing plain http"):
        KubernetesClient("http://ABC.gr7.us-east-1.eks.amazonaws.com")
    with pytest.raises(ValueError, match="https://"):
        KubernetesClient("ftp://example")
    KubernetesClient("http://127.0.0.1:1")  # allowed: tests only


def test_an_unreachable_server_is_a_typed_error() -> None:
    client = KubernetesClient(
        "http://127.0.0.1:1", timeout=1, max_attempts=2, backoff=0, sleep=lambda _: None
    )
    with pytest.raises(KubernetesApiError, match="Unreachable"):
        client.get(JOBS)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (429, KubernetesUnavailableError),
        (503, KubernetesUnavailableError),
        (409, ConflictError),
        (404, NotFoundError),
        (403, UnauthorizedError),
        (422, KubernetesRejectedError),
    ],
)
def test_failures_are_classified_where_the_request_is_made(
    fake_k8s: FakeKubernetes, status: int, expected: type[KubernetesApiError]
) -> None:
    # Given a request the server keeps refusing with ``status`` (a 403 as the authorizer words it)
    message = RBAC_DENIAL if status == 403 else "injected fault"
    fake_k8s.fail("GET", JOBS, status, times=10, message=message)
    client = KubernetesClient(fake_k8s.url, max_attempts=2, backoff=0, sleep=lambda _: None)
    # When it is made, then the error's type says whether a later retry can help
    with pytest.raises(expected) as raised:
        client.get(JOBS)
    transient = status in (409, 429, 503)
    assert isinstance(raised.value, TransientError) is transient
    assert isinstance(raised.value, PermanentError) is not transient
    assert raised.value.status == status


RBAC_DENIAL = (
    'jobs.batch is forbidden: User "osprey-apply" cannot list resource "jobs" in API group "batch" at the '
    "cluster scope"
)
WEBHOOK_DENIAL = (
    'admission webhook "guard.example.com" denied the request: priorities are frozen during the maintenance '
    "window"
)
POLICY_DENIAL = (
    "workloads.kueue.x-k8s.io \"job-train-1\" is forbidden: ValidatingAdmissionPolicy 'osprey-writes' with "
    "binding 'osprey-writes' denied request: osprey-apply may change spec.priority only"
)
QUOTA_DENIAL = 'pods "train-0" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=8, limited: 4'


@pytest.mark.parametrize(
    ("message", "expected", "hint"),
    [
        (RBAC_DENIAL, UnauthorizedError, True),
        ('User "osprey-apply" cannot get path "/apis"', UnauthorizedError, True),
        (WEBHOOK_DENIAL, AdmissionDeniedError, False),
        (POLICY_DENIAL, AdmissionDeniedError, False),
        (QUOTA_DENIAL, AdmissionDeniedError, False),
    ],
)
def test_a_403_sends_the_operator_to_rbac_only_when_the_authorizer_refused(
    fake_k8s: FakeKubernetes, message: str, expected: type[KubernetesApiError], hint: bool
) -> None:
    # Given a write the server refuses with 403 Forbidden, worded by the authorizer or by an admission controller
    fake_k8s.fail("PATCH", JOBS, 403, message=message, reason="Forbidden")
    client = KubernetesClient(fake_k8s.url, max_attempts=1)
    # When it is made
    with pytest.raises(KubernetesApiError) as raised:
        client.merge_patch(JOBS, {"spec": {}})
    # Then only the authorizer's refusal is an UnauthorizedError naming the access entry and docs/eks.md; an
    # admission denial is a permanent rejection quoting the controller's message and nothing about RBAC
    error = raised.value
    assert type(error) is expected
    assert isinstance(error, PermanentError)
    assert (error.status, error.reason) == (403, "Forbidden")
    assert message in str(error)
    assert ("access entry" in str(error)) is hint
    assert ("docs/eks.md" in str(error)) is hint


def test_no_answer_at_all_is_transient() -> None:
    client = KubernetesClient("http://127.0.0.1:1", timeout=1, max_attempts=1, sleep=lambda _: None)
    with pytest.raises(TransientError):
        client.get(JOBS)
