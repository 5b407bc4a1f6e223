"""An admission webhook between Osprey and the Workload: its refusal, and its absence, through the real API
server. Kueue's own webhooks never refuse a ``spec.priority`` change (v0.17 ``ValidateWorkloadUpdate``), so the
refusing webhook here is the test's own, as a cluster's policy engine would be."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from osprey_control.backends import Outcome
from osprey_control.backends.eks import AdmissionDeniedError, EksApplier
from osprey_control.errors import PermanentError
from tests.k8s import objects
from tests.k8s.cluster import LocalKubernetes
from tests.k8s.objects import KUEUE, change

WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MESSAGE = "priorities are frozen in this namespace during the maintenance window"


class _Deny(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": False,
                         "status": {"code": 403, "message": MESSAGE}},
        }).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def denying_webhook(k8s: LocalKubernetes, tmp_path: Path) -> Iterator[str]:
    """An HTTPS admission webhook on loopback (certificate from the fixture's CA) that denies every request;
    its URL."""
    certs = k8s.ca.issue(tmp_path / "hook", "denying-webhook")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Deny)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "tls.crt", certs / "tls.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _guard_workloads(k8s: LocalKubernetes, namespace: str, url: str) -> dict[str, Any]:
    """A ValidatingWebhookConfiguration sending every Workload UPDATE in ``namespace`` to ``url``, failing
    closed."""
    return k8s.create(WEBHOOKS, {
        "metadata": {"name": f"guard-{namespace}"},
        "webhooks": [{
            "name": "guard.osprey.test",
            "clientConfig": {"url": url, "caBundle": base64.b64encode(k8s.ca.pem.encode()).decode()},
            "rules": [{"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["*"], "operations": ["UPDATE"],
                       "resources": ["workloads"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }],
    })  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_webhook_refusal_fails_the_job_permanently_with_the_webhooks_message(
    k8s: LocalKubernetes, denying_webhook: str
) -> None:
    # Given an opted-in Job's Workload in a namespace whose admission webhook refuses Workload updates
    namespace = objects.namespace(k8s, "frozen")
    owner = objects.job(k8s, namespace, "train")
    workload = objects.owned_workload(k8s, owner, priority=100)
    guard = _guard_workloads(k8s, namespace, denying_webhook)
    admin = k8s.client()
    try:
        # When the applier writes a new priority
        report = EksApplier(lambda cluster: admin).apply([change(owner, 55)])
    finally:
        admin.request("DELETE", f"{WEBHOOKS}/{guard['metadata']['name']}")
    # Then the job fails, permanently (repeating the write cannot help), naming the webhook and its reason
    [result] = report.results
    assert (result.outcome, result.transient) == (Outcome.FAILED, False)
    assert 'admission webhook "guard.osprey.test" denied the request' in result.reason
    assert MESSAGE in result.reason
    path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{workload['metadata']['name']}"
    assert admin.get(path)["spec"]["priority"] == 100


def test_an_unreachable_webhook_fails_the_job_as_transient(k8s: LocalKubernetes) -> None:
    # Given a namespace whose Workload webhook fails closed and is down (nothing listens on its port)
    namespace = objects.namespace(k8s, "hookdown")
    owner = objects.job(k8s, namespace, "train")
    objects.owned_workload(k8s, owner, priority=100)
    guard = _guard_workloads(k8s, namespace, f"https://127.0.0.1:{_free_port()}/")
    admin = k8s.client(backoff=0.01)
    try:
        # When the applier writes a new priority
        report = EksApplier(lambda cluster: admin).apply([change(owner, 55)])
    finally:
        admin.request("DELETE", f"{WEBHOOKS}/{guard['metadata']['name']}")
    # Then the job fails as transient (the next cycle tries again), saying the webhook could not be called
    [result] = report.results
    assert (result.outcome, result.transient) == (Outcome.FAILED, True)
    assert "failed calling webhook" in result.reason


def test_a_webhook_refusal_does_not_send_the_operator_to_rbac(
    k8s: LocalKubernetes, denying_webhook: str
) -> None:
    # Given a webhook that refuses Workload updates with 403 Forbidden (as policy engines do)
    namespace = objects.namespace(k8s, "frozen")
    owner = objects.job(k8s, namespace, "train")
    workload = objects.owned_workload(k8s, owner, priority=100)
    path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{workload['metadata']['name']}"
    guard = _guard_workloads(k8s, namespace, denying_webhook)
    admin = k8s.client()
    try:
        # When the applier writes a priority, and the client patches the Workload itself
        report = EksApplier(lambda cluster: admin).apply([change(owner, 55)])
        with pytest.raises(AdmissionDeniedError) as caught:
            admin.merge_patch(path, {"spec": {"priority": 7}})
    finally:
        admin.request("DELETE", f"{WEBHOOKS}/{guard['metadata']['name']}")
    # Then the reason is the webhook's, not a missing access entry or RoleBinding
    [result] = report.results
    assert "access entry" not in result.reason
    assert "docs/eks.md" not in result.reason
    assert "Unauthorized" not in result.reason
    # And the client's error is an admission denial (permanent), quoting the webhook's message
    assert (caught.value.status, caught.value.reason) == (403, "Forbidden")
    assert isinstance(caught.value, PermanentError)
    assert MESSAGE in caught.value.message
