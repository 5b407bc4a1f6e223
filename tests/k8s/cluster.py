"""A real Kubernetes control plane on loopback for the tests: etcd, kube-apiserver, Kueue's CRDs and the Kueue
manager, built by ``.ci/k8s`` (versions in ``.ci/k8s-versions``) into ``$OSPREY_K8S_CACHE`` (default
``~/.cache/osprey/k8s``).

Everything lives in one temporary directory (etcd's data, certificates, configs, logs); ports are chosen
free on 127.0.0.1. The API server runs with RBAC (``--authorization-mode=RBAC``: Node authorization needs
kubelets, and there are none), service-account tokens signed by a key made here, TLS from a CA made here
(:mod:`tests.k8s.pki`), and a static token file with two identities in ``system:masters``: the tests'
admin and the Kueue manager (its own RBAC from upstream's kustomize is not applied: the manager is not what
is under test). No kubelet, scheduler or controller-manager: a Pod stays Pending unless a test sets its
status, and a namespace has no ``default`` ServiceAccount unless a test makes one.

Each process runs as a child of this one with the marker ``OSPREY_K8S_FIXTURE=<dir>`` in its environment;
:meth:`LocalKubernetes.stop` stops them and kills anything still carrying the marker, and
:meth:`LocalKubernetes.leftovers` lists such processes (the fixture asserts none).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from osprey_control.backends.eks import KubernetesClient, NotFoundError
from tests.k8s import kueue
from tests.k8s.pki import CertificateAuthority, write_service_account_keys
from tests.processes import marked_processes

__all__ = [
    "KUEUE_NAMESPACE",
    "MARKER_VARIABLE",
    "OSPREY_GROUPS",
    "Binaries",
    "LocalKubernetes",
    "find_binaries",
]

MARKER_VARIABLE = "OSPREY_K8S_FIXTURE"
KUEUE_NAMESPACE = "kueue-system"
_REPO = Path(__file__).resolve().parents[2]
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
OSPREY_GROUPS = ("osprey-discovery", "osprey-apply", "osprey-gang-watch")
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class Binaries:
    """Where ``.ci/k8s`` put each program (and Kueue's manifests) for the pinned versions."""

    def __init__(self, cache: Path, versions: Mapping[str, str]) -> None:
        self.versions = dict(versions)
        self.etcd = cache / f"etcd-{versions['ETCD_VERSION']}" / "etcd"
        self.apiserver = cache / f"kube-apiserver-{versions['KUBERNETES_VERSION']}" / "kube-apiserver"
        self.kueue_dir = cache / f"kueue-{versions['KUEUE_VERSION']}"
        self.kueue = self.kueue_dir / "kueue"
        # PyTorchJob's and JobSet's CRDs (no operator: the tests play the operator's part where they need it).
        self.job_crds_dir = (
            cache / f"crds-training-operator-{versions['TRAINING_OPERATOR_VERSION']}"
            f"-jobset-{versions['JOBSET_VERSION']}"
        )

    def missing(self, *, kueue_manager: bool) -> list[Path]:
        wanted = [self.etcd, self.apiserver, self.kueue_dir / "crds", self.job_crds_dir / ".complete"]
        if kueue_manager:
            wanted += [self.kueue, self.kueue_dir / "webhook" / "manifests.yaml"]
        return [path for path in wanted if not path.exists()]


def find_binaries() -> Binaries:
    versions = {}
    for line in (_REPO / ".ci" / "k8s-versions").read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            versions[name.strip()] = value.strip()
    cache = Path(os.environ.get("OSPREY_K8S_CACHE") or Path.home() / ".cache" / "osprey" / "k8s")
    return Binaries(cache, versions)


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class LocalKubernetes:
    """etcd + kube-apiserver (+ Kueue's CRDs, + the Kueue manager when ``kueue_manager``) on loopback."""

    def __init__(self, binaries: Binaries, *, kueue_manager: bool = True) -> None:
        self.binaries = binaries
        self.kueue_manager = kueue_manager
        self.root = Path(tempfile.mkdtemp(prefix="osprey-k8s-"))
        self.admin_token = secrets.token_hex(16)
        self._kueue_token = secrets.token_hex(16)
        # One identity per Osprey Lambda role, in the Kubernetes group an EKS access entry maps that role to
        # (docs/eks.md); the user is named after its group, the group is what RBAC binds.
        self.group_tokens = {group: secrets.token_hex(16) for group in OSPREY_GROUPS}
        self.ca = CertificateAuthority.create()
        self.ca_file = self.ca.write(self.root / "ca.crt")
        self._processes: dict[str, subprocess.Popen[bytes]] = {}  # by name, in start order
        self.api_port = self.webhook_port = self.health_port = 0
        self.started = False
        self.start_seconds: dict[str, float] = {}  # how long each stage took, for docs/performance.md

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def client(self, group: str | None = None, **options: Any) -> KubernetesClient:
        """Osprey's own client against this API server, as the admin, or as the identity in ``group`` (one
        of :data:`OSPREY_GROUPS`)."""
        bearer = self.group_tokens[group] if group else self.admin_token
        return KubernetesClient(self.server, token=lambda: bearer, ca_pem=self.ca.pem, **options)

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> LocalKubernetes:
        started = time.monotonic()
        etcd_port, peer_port, self.api_port, self.webhook_port, self.health_port = _free_ports(5)
        self.started = True
        try:
            self._start_etcd(etcd_port, peer_port, timeout)
            self._stage("etcd", started)
            self._start_apiserver(etcd_port, timeout)
            self._stage("kube-apiserver", started)
            self._install_kueue_crds(timeout)
            self._stage("crds", started)
            if self.kueue_manager:
                self._start_kueue(timeout)
                self._stage("kueue", started)
        except Exception:
            self.stop()
            raise
        return self

    def _stage(self, name: str, started: float) -> None:
        self.start_seconds[name] = round(time.monotonic() - started, 2)

    def stop(self) -> None:
        """Stop every process (Kueue, then the API server, then etcd), kill what still carries the marker,
        and remove the directory."""
        for process in reversed(list(self._processes.values())):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        self.started = False
        for pid in self.leftovers():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._wait(lambda: not self.leftovers(), 10, "marked processes gone")
        if os.environ.get("OSPREY_K8S_KEEP") != "1":  # keep the logs to debug a start-up
            shutil.rmtree(self.root, ignore_errors=True)

    def leftovers(self) -> list[int]:
        """Live processes whose environment carries this control plane's marker."""
        return marked_processes(MARKER_VARIABLE, str(self.root))

    def __enter__(self) -> LocalKubernetes:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- objects -----------------------------------------------------------------------------------------

    def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the collection ``path`` as the admin."""
        return self.client().request("POST", path, body=body)

    def apply_namespace(self, name: str) -> None:
        """The namespace ``name`` and its ``default`` ServiceAccount (no controller-manager makes it here)."""
        client = self.client()
        for path, body in (
            ("/api/v1/namespaces", {"metadata": {"name": name}}),
            (f"/api/v1/namespaces/{name}/serviceaccounts", {"metadata": {"name": "default"}}),
        ):
            name_path = f"{path}/{body['metadata']['name']}"
            try:
                client.get(name_path)
            except NotFoundError:
                client.request("POST", path, body=body)

    # -- internals ---------------------------------------------------------------------------------------

    def _start_etcd(self, port: int, peer_port: int, timeout: float) -> None:
        client_url, peer_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{peer_port}"
        self._spawn(
            [str(self.binaries.etcd), "--name=osprey", f"--data-dir={self.root / 'etcd'}",
             f"--listen-client-urls={client_url}", f"--advertise-client-urls={client_url}",
             f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
             f"--initial-cluster=osprey={peer_url}",
             # A throwaway store: no fsync is what makes writes fast on a shared 2-core machine.
             "--unsafe-no-fsync", "--log-level=warn"],
            "etcd",
        )  # fmt: skip
        self._wait(lambda: self._http_ok(f"{client_url}/health"), timeout, "etcd healthy")

    def _start_apiserver(self, etcd_port: int, timeout: float) -> None:
        pki = self.root / "pki"
        self.ca.issue(pki / "apiserver", "kube-apiserver")
        sa_key, sa_pub = write_service_account_keys(pki / "sa")
        tokens = pki / "tokens.csv"
        tokens.write_text(
            f'{self.admin_token},osprey-admin,osprey-admin,"system:masters"\n'
            f'{self._kueue_token},kueue-manager,kueue-manager,"system:masters"\n'
            + "".join(f'{token},{group},{group},"{group}"\n' for group, token in self.group_tokens.items())
        )
        tokens.chmod(0o600)
        self._spawn(
            [str(self.binaries.apiserver),
             f"--etcd-servers=http://127.0.0.1:{etcd_port}",
             "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
             f"--tls-cert-file={pki / 'apiserver' / 'tls.crt'}",
             f"--tls-private-key-file={pki / 'apiserver' / 'tls.key'}",
             f"--client-ca-file={self.ca_file}", f"--token-auth-file={tokens}",
             f"--service-account-key-file={sa_pub}", f"--service-account-signing-key-file={sa_key}",
             "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
             "--authorization-mode=RBAC", "--anonymous-auth=false",
             # Allocation only: no Service here is ever reached, and no traffic goes to this range.
             "--service-cluster-ip-range=10.96.0.0/24", "--endpoint-reconciler-type=none",
             f"--cert-dir={pki / 'generated'}", "--profiling=false", "--v=1"],
            "kube-apiserver",
        )  # fmt: skip
        self._wait(self._apiserver_ready, timeout, "kube-apiserver /readyz")

    def _install_kueue_crds(self, timeout: float) -> None:
        """Kueue's CRDs and the job kinds' (PyTorchJob, JobSet) before the manager starts: Kueue sets up an
        integration only when its kind is served."""
        client = self.client()
        port = self.webhook_port if self.kueue_manager else None
        names = []
        found = kueue.crds(self.binaries.kueue_dir / "crds", webhook_port=port, ca_pem=self.ca.pem)
        found += kueue.crds(self.binaries.job_crds_dir, webhook_port=None, ca_pem=self.ca.pem)
        for crd in found:
            client.request("POST", _CRDS, body=crd)
            names.append(crd["metadata"]["name"])

        def established() -> bool:
            for name in names:
                conditions = client.get(f"{_CRDS}/{name}").get("status", {}).get("conditions") or []
                if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                    return False
            return True

        self._wait(established, timeout, "the CRDs Established")

    def _start_kueue(self, timeout: float) -> None:
        self.apply_namespace(KUEUE_NAMESPACE)
        directory = self.root / "kueue"
        cert_dir = self.ca.issue(directory / "certs", "kueue-webhook")
        # With internal cert management off, the manager (v0.17 cmd/kueue/main.go) loads its metrics server's
        # certificate from the fixed path /etc/kueue/metrics/certs and exits without it, even with metrics
        # off. Any certificate will do (nothing connects to it): one is put there once and left for the
        # next run, and one already there (another run's, or a real one) is used as it is.
        if not (METRICS_CERT_DIR / "tls.key").exists():
            self.ca.issue(METRICS_CERT_DIR, "kueue-metrics")
        config = kueue.manager_configuration(
            namespace=KUEUE_NAMESPACE,
            webhook_port=self.webhook_port,
            health_port=self.health_port,
            cert_dir=cert_dir,
            frameworks=kueue.FRAMEWORKS,
        )
        (directory / "config.yaml").write_text(json.dumps(config))
        kubeconfig = directory / "kubeconfig"
        kubeconfig.write_text(json.dumps(kueue.kubeconfig(self.server, self.ca_file, self._kueue_token)))
        manifest = self.binaries.kueue_dir / "webhook" / "manifests.yaml"
        client = self.client()
        for configuration in kueue.webhook_configurations(
            manifest, port=self.webhook_port, ca_pem=self.ca.pem
        ):
            plural = configuration["kind"].lower() + "s"
            client.request("POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", body=configuration)
        self._spawn(
            [str(self.binaries.kueue), f"--config={directory / 'config.yaml'}", "--zap-log-level=2"],
            "kueue",
            extra={"KUBECONFIG": str(kubeconfig)},
        )
        self._wait(
            lambda: self._http_ok(f"http://127.0.0.1:{self.health_port}/readyz"), timeout, "Kueue /readyz"
        )

    def _apiserver_ready(self) -> bool:
        # /readyz answers plain text ("ok"), which Osprey's JSON client does not read: a bare request.
        request = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        context = ssl.create_default_context(cadata=self.ca.pem)
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        try:
            with opener.open(request, timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _http_ok(self, url: str) -> bool:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(url, timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _spawn(self, args: Sequence[str], name: str, extra: Mapping[str, str] | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "HTTPS_PROXY", "https_proxy")}
        env.update({MARKER_VARIABLE: str(self.root), **(extra or {})})
        log = (self.root / f"{name}.log").open("wb")
        self._processes[name] = subprocess.Popen(
            args, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root
        )
        log.close()

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [name for name, process in self._processes.items() if process.poll() is not None]
            if dead and self.started:
                raise RuntimeError(f"{dead} exited while waiting for {what}; logs in {self.root}")
            time.sleep(0.1)
        raise TimeoutError(
            f"local Kubernetes: timed out after {timeout:.0f} s waiting for {what}; logs in {self.root}"
        )
