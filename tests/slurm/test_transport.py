"""Where the slurmrestd token may go (issue 28 item 9): TLS by default, plain http only when asked, no redirect
followed with the token, answers bounded in size; and the credentials a secret may hold.

Local HTTP(S) servers on loopback stand in for slurmrestd: what is tested is the client's transport, which is the
same for any server. The certificates are made here (a CA and a server certificate it signs)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import boto3
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from moto import mock_aws

from osprey_control.backends.slurm import SecretCredentials, SlurmClient, SlurmCredentials, mint_token
from osprey_control.backends.slurm.client import SlurmRejectedError
from osprey_control.errors import PermanentError

CREDENTIALS = SlurmCredentials("osprey", "aaa.bbb.ccc")


class _Recorder(BaseHTTPRequestHandler):
    """Answers ``GET`` with ``answer`` (status, headers, body) and records the token headers it was sent."""

    answer: ClassVar[tuple[int, dict[str, str], bytes]] = (200, {}, b'{"jobs": []}')
    seen: ClassVar[list[str | None]]

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("X-SLURM-USER-TOKEN"))
        status, declared, body = self.answer
        headers = dict(declared)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if headers.pop("X-Undeclared", None) is None:
            self.send_header("Content-Length", str(len(body)))  # else HTTP/1.0: the body ends at the close
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def _serve(answer: tuple[int, dict[str, str], bytes], tls: ssl.SSLContext | None = None) -> Iterator[Any]:
    handler = type("Handler", (_Recorder,), {"answer": answer, "seen": []})
    server = HTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if tls else "http"
    try:
        yield f"{scheme}://127.0.0.1:{server.server_port}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def elsewhere() -> Iterator[tuple[str, type[_Recorder]]]:
    with _serve((200, {}, b'{"jobs": []}')) as served:
        yield served


def _pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, str]:
    """A server context for 127.0.0.1 with a certificate signed by a fresh CA, and that CA's PEM."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test slurmrestd CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    folder: Path = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_text(_pem(certificate))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return context, _pem(ca)


def test_plain_http_is_refused_unless_the_caller_accepts_the_token_in_clear() -> None:
    # When a client is made for an http:// slurmrestd without the flag, Then it refuses, naming the way out
    with pytest.raises(ValueError, match="insecureHttp"):
        SlurmClient("http://10.0.1.23:6820", lambda: CREDENTIALS)
    # And with the flag it is made
    assert SlurmClient("http://10.0.1.23:6820", lambda: CREDENTIALS, allow_insecure_http=True).url


def test_https_verifies_the_certificate_against_the_clusters_ca(tls: tuple[ssl.SSLContext, str]) -> None:
    context, ca_pem = tls
    with _serve((200, {}, b'{"jobs": [{"job_id": 7}]}'), tls=context) as (url, handler):
        # Given slurmrestd behind TLS with a certificate from the cluster's own CA
        # When the client knows that CA, Then it reads the answer
        assert SlurmClient(url, lambda: CREDENTIALS, ca_pem=ca_pem).jobs() == [{"job_id": 7}]
        # When it does not, Then the certificate is refused (a setting to fix: permanent), and no token was sent
        before = len(handler.seen)
        with pytest.raises(SlurmRejectedError, match="caCertificate") as refused:
            SlurmClient(url, lambda: CREDENTIALS).jobs()
        assert refused.value.reason == "tls"
        assert len(handler.seen) == before


def test_a_redirect_is_never_followed_with_the_token(elsewhere: tuple[str, type[_Recorder]]) -> None:
    target, target_handler = elsewhere
    redirect = (302, {"Location": f"{target}/slurm/v0.0.38/jobs"}, b"")
    with _serve(redirect) as (url, handler):
        client = SlurmClient(url, lambda: CREDENTIALS, allow_insecure_http=True)
        # When slurmrestd's address answers with a redirect
        with pytest.raises(SlurmRejectedError, match="never follows") as refused:
            client.jobs()
        # Then the error is permanent and names where it pointed, and the other host never saw the token
        assert refused.value.reason == "redirect"
        assert target in str(refused.value)
        assert handler.seen == ["aaa.bbb.ccc"]
        assert target_handler.seen == []


@pytest.mark.parametrize("declare_length", [True, False])
def test_an_answer_over_the_limit_is_refused_without_being_read_whole(declare_length: bool) -> None:
    body = json.dumps({"jobs": [{"job_id": n, "name": "x" * 100} for n in range(100)]}).encode()
    headers = {} if declare_length else {"X-Undeclared": "1"}
    with _serve((200, headers, body)) as (url, _handler):
        client = SlurmClient(url, lambda: CREDENTIALS, allow_insecure_http=True, max_response_bytes=4096)
        with pytest.raises(SlurmRejectedError, match="over 4096 bytes") as refused:
            client.jobs()
        assert refused.value.reason == "response-too-large"
        # And a limit above the answer reads it
        roomy = SlurmClient(url, lambda: CREDENTIALS, allow_insecure_http=True, max_response_bytes=len(body))
        assert len(roomy.jobs()) == 100


# -- what the secret may hold -------------------------------------------------------------------------------


def _token(expires_in: int | None, now: float) -> str:
    claims: dict[str, Any] = {"iat": int(now), "sun": "osprey"}
    if expires_in is not None:
        claims["exp"] = int(now) + expires_in
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"eyJhbGciOiJIUzI1NiJ9.{payload}.c2ln"


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_signing_key_secret_is_refused_unless_allowed_by_name() -> None:
    key = json.dumps({"jwt_key": base64.b64encode(b"k" * 32).decode(), "username": "osprey"})
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        secrets.create_secret(Name="slurm-key", SecretString=key)
        # When the bridge reads a secret holding jwt_hs256.key, Then it refuses: the key mints tokens for any user
        with pytest.raises(PermanentError, match="allowSigningKey") as refused:
            SecretCredentials("slurm-key", client=secrets)()
        assert refused.value.reason == "bad-secret"
        # And with the opt-in it mints a 15-minute token for the configured user only
        minted = SecretCredentials("slurm-key", allow_signing_key=True, client=secrets)()
        assert minted.user_name == "osprey"
        assert minted.token == mint_token(b"k" * 32, "osprey", now=_claims(minted.token)["iat"])


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def test_a_token_must_expire_and_a_rotated_one_is_read_before_the_old_one_lapses() -> None:
    clock = _Clock(1_800_000_000.0)
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        secrets.create_secret(Name="never", SecretString=_token(None, clock.now))
        # When the secret's token has no exp, Then it is refused: a leaked one would work for ever
        with pytest.raises(PermanentError, match="no exp claim"):
            SecretCredentials("never", client=secrets, clock=clock)()
        # Given a token valid for an hour, which the rotation job replaces after 30 minutes
        first = _token(3600, clock.now)
        secrets.create_secret(Name="rotated", SecretString=first)
        source = SecretCredentials("rotated", client=secrets, clock=clock)
        assert source().token == first
        clock.now += 1800
        second = _token(3600, clock.now)
        secrets.put_secret_value(SecretId="rotated", SecretString=second)
        assert source().token == first  # cached while it has time left
        # When the cached token is within a minute of its exp, Then the secret is read again
        clock.now += 1800 - 30
        assert source().token == second
        # When the rotation stops and the stored token has expired, Then the error says so, not "unauthorized"
        clock.now += 1860  # the second token's exp was 1800 + 3600 s after the start
        with pytest.raises(PermanentError, match="expired 30 s ago") as expired:
            source()
        assert expired.value.reason == "token-expired"
