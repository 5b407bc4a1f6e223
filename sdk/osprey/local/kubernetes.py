"""A minimal Kubernetes API server for ``osprey local``'s EKS cluster: real HTTP on 127.0.0.1, in memory.

It serves what Osprey's EKS discovery and Kueue applier use: lists with label selectors, get, RFC 7386
merge-patch with ``resourceVersion`` conflicts, and the Kueue API group's discovery document. The moto EKS
cluster's endpoint is pointed at it (``http://`` is accepted for loopback hosts only). The test suite has a
fuller fake with fault injection (``tests/control/backends/eks/fake_k8s.py``).

It has no kubelet or job controller; the one thing it plays of them is a pod turning Ready at a set time
(:meth:`LocalKubernetes.ready_at`), with its Job's ``status.ready`` counting it, which is what the gang watch
and the EKS discovery read.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__: list[str] = []

# /api/v1[/namespaces/NS]/PLURAL[/NAME] and /apis/GROUP/VERSION[/namespaces/NS]/PLURAL[/NAME]
API_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?$"
)
KUEUE_VERSION = "v1beta1"


def _pod_table(pods: list[dict[str, Any]], metadata: dict[str, Any]) -> dict[str, Any]:
    """Pods as the API server's Table with ``includeObject=Metadata`` (what EKS discovery asks for): the printed
    columns EKS discovery reads (Name, Node) and each pod's metadata, never its spec."""
    rows = [
        {"cells": [pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName") or "<none>"],
         "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": pod["metadata"]}}
        for pod in pods
    ]  # fmt: skip
    columns = [{"name": "Name", "type": "string"}, {"name": "Node", "type": "string"}]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": columns,
            "rows": rows}  # fmt: skip


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """An equality-based label selector (``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, comma = and)."""
    for term in filter(None, (part.strip() for part in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _status(code: int, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "message": message}


@dataclass
class LocalKubernetes:
    objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    resource_version: int = 1
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    # (namespace, pod) -> time.monotonic() at which the pod turns Ready
    _ready_at: dict[tuple[str, str], float] = field(default_factory=dict)

    def ready_at(self, namespace: str, pod: str, when: float) -> None:
        """Make pod ``namespace/pod`` Ready at ``when`` (``time.monotonic()``); seen by the next request."""
        with self._lock:
            self._ready_at[(namespace, pod)] = when

    def _advance(self) -> None:
        """Turn every pod whose time has come Ready, and count it in its Job's ``status.ready`` (lock held)."""
        now = time.monotonic()
        due = [key for key, when in self._ready_at.items() if when <= now]
        pods, jobs = self.objects.get(("v1", "pods"), {}), self.objects.get(("batch/v1", "jobs"), {})
        for key in due:
            del self._ready_at[key]
            pod = pods.get(key)
            if pod is None:
                continue
            self.resource_version += 1
            pod["metadata"]["resourceVersion"] = str(self.resource_version)
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            job = jobs.get(
                (key[0], str(pod["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name")))
            )
            if job is not None:
                status = job.setdefault("status", {})
                status["ready"] = int(status.get("ready") or 0) + 1
                self.resource_version += 1
                job["metadata"]["resourceVersion"] = str(self.resource_version)

    def add(self, api_version: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            obj = copy.deepcopy(obj)
            obj.setdefault("apiVersion", api_version)
            metadata = obj.setdefault("metadata", {})
            metadata.setdefault("uid", f"uid-{metadata['name']}")
            # Stamped at creation, as the API server does (queue_wait and `osprey jobs` AGE read it).
            metadata.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
            self.resource_version += 1
            metadata["resourceVersion"] = str(self.resource_version)
            self.objects.setdefault((api_version, plural), {})[
                (metadata.get("namespace", ""), metadata["name"])
            ] = obj
            return copy.deepcopy(obj)

    def handle(
        self, method: str, raw_path: str, content_type: str, body: bytes, accept: str = "application/json"
    ) -> tuple[int, dict[str, Any]]:
        parts = urlsplit(raw_path)
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        if parts.path == "/apis/kueue.x-k8s.io":
            version = {"groupVersion": f"kueue.x-k8s.io/{KUEUE_VERSION}", "version": KUEUE_VERSION}
            return 200, {"kind": "APIGroup", "name": "kueue.x-k8s.io", "versions": [version],
                         "preferredVersion": version}  # fmt: skip
        match = API_PATH.match(parts.path)
        if not match:
            return 404, _status(404, parts.path)
        api_version = "v1" if match["core"] else f"{match['group']}/{match['version']}"
        with self._lock:
            self._advance()
            store = self.objects.setdefault((api_version, match["plural"]), {})
            if match["name"] is None:
                selector = query.get("labelSelector", "")
                items = [
                    copy.deepcopy(obj)
                    for (namespace, _), obj in sorted(store.items())
                    if match["ns"] in (None, namespace)
                    and selector_matches(selector, obj["metadata"].get("labels") or {})
                ]
                metadata = {"resourceVersion": str(self.resource_version)}
                if "as=Table" in accept and match["plural"] == "pods":
                    return 200, _pod_table(items, metadata)
                return 200, {"kind": "List", "apiVersion": api_version, "metadata": metadata, "items": items}
            key = (match["ns"] or "", match["name"])
            if key not in store:
                return 404, _status(404, f"{match['plural']} {match['name']} not found")
            if method == "GET":
                return 200, copy.deepcopy(store[key])
            if method != "PATCH" or content_type != "application/merge-patch+json":
                return 415, _status(415, f"{method} {content_type}")
            patch = json.loads(body)
            wanted = (patch.get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != store[key]["metadata"]["resourceVersion"]:
                return 409, _status(409, "the object has been modified")
            updated = merge_patch(store[key], patch)
            self.resource_version += 1
            updated["metadata"]["resourceVersion"] = str(self.resource_version)
            store[key] = updated
            return 200, copy.deepcopy(updated)

    def start(self) -> LocalKubernetes:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _respond(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, payload = fake.handle(
                    self.command, self.path, str(self.headers.get("Content-Type")), body,
                    str(self.headers.get("Accept") or "application/json"),
                )  # fmt: skip
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = _respond  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the CLI's output is the cycle's."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="osprey-local-k8s", daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
