"""A tiny fake Kubernetes API server on 127.0.0.1: real HTTP, label selectors, ``continue`` paging,
get, RFC 7386 merge-patch, 409 on a stale ``metadata.resourceVersion``, discovery of the Kueue group, and
injected faults. Objects live in memory; every write bumps the global resourceVersion like etcd does."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

# The same HTTP semantics as the embedded server `osprey local` ships: one implementation of each.
from osprey.local.kubernetes import API_PATH, merge_patch, selector_matches

LOST = -1  # a Fault status: the request is carried out and the connection closed without an answer


@dataclass
class Fault:
    method: str
    path: str
    status: int
    times: int
    message: str = "injected fault"
    reason: str = "Injected"


@dataclass
class FakeKubernetes:
    kueue_versions: tuple[str, ...] = ("v1beta1",)
    token: str | None = None
    page_size_cap: int | None = None
    # (api prefix, plural) -> {(namespace, name): object}
    objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    served: set[tuple[str, str]] = field(default_factory=set)  # resource types whose CRD is installed
    requests: list[tuple[str, str]] = field(default_factory=list)
    accepts: list[tuple[str, str]] = field(default_factory=list)  # (list path, Accept header)
    queries: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (GET path, query parameters)
    faults: list[Fault] = field(default_factory=list)
    # Writes that land but whose answer is lost: the connection closes before the status line (LOST).
    lost: list[Fault] = field(default_factory=list)
    resource_version: int = 100
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    # -- setup ------------------------------------------------------------------------------------------

    def serve(self, api_version: str, plural: str) -> None:
        self.served.add((api_version, plural))

    def add(self, api_version: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.served.add((api_version, plural))
            obj = copy.deepcopy(obj)
            obj.setdefault("apiVersion", api_version)
            metadata = obj.setdefault("metadata", {})
            metadata.setdefault("uid", f"uid-{metadata['name']}")
            metadata.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
            self.resource_version += 1
            metadata["resourceVersion"] = str(self.resource_version)
            key = (metadata.get("namespace", ""), metadata["name"])
            self.objects.setdefault((api_version, plural), {})[key] = obj
            return copy.deepcopy(obj)

    def delete(self, api_version: str, plural: str, namespace: str, name: str) -> None:
        with self.lock:
            del self.objects[(api_version, plural)][(namespace, name)]

    def stored(self, api_version: str, plural: str, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self.objects[(api_version, plural)][(namespace, name)])

    def fail(
        self,
        method: str,
        path: str,
        status: int,
        times: int = 1,
        *,
        message: str = "injected fault",
        reason: str = "Injected",
    ) -> None:
        """The next ``times`` ``method`` requests to ``path`` answer ``status`` with a Status of ``reason`` and
        ``message`` (as the API server words its refusals)."""
        self.faults.append(Fault(method, path, status, times, message, reason))

    def lose_answer(self, method: str, path: str, times: int = 1) -> None:
        """The next ``times`` ``method`` requests to ``path`` are carried out, then the connection is closed
        without an answer (a reply lost on the network: the client cannot tell it landed)."""
        self.lost.append(Fault(method, path, LOST, times))

    def writes(self) -> list[str]:
        return [path for method, path in self.requests if method == "PATCH"]

    # -- request handling (called from server threads) ---------------------------------------------------

    def handle(self, method: str, raw_path: str, headers: Any, body: bytes) -> tuple[int, dict[str, Any]]:
        parts = urlsplit(raw_path)
        path, query = parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}
        with self.lock:
            self.requests.append((method, path))
            if method == "GET":
                self.queries.append((path, dict(query)))
            if self.token is not None and headers.get("Authorization") != f"Bearer {self.token}":
                return 401, _status(401, "Unauthorized", "bad token")
            for fault in self.faults:
                if fault.times > 0 and fault.method == method and fault.path == path:
                    fault.times -= 1
                    return fault.status, _status(fault.status, fault.reason, fault.message)
            if path == "/apis/kueue.x-k8s.io":
                if not self.kueue_versions:
                    return 404, _status(404, "NotFound", "the server could not find the requested resource")
                versions = [
                    {"groupVersion": f"kueue.x-k8s.io/{v}", "version": v} for v in self.kueue_versions
                ]
                return 200, {"kind": "APIGroup", "name": "kueue.x-k8s.io", "versions": versions,
                             "preferredVersion": versions[0]}  # fmt: skip
            match = API_PATH.match(path)
            if not match:
                return 404, _status(404, "NotFound", path)
            api_version = "v1" if match["core"] else f"{match['group']}/{match['version']}"
            kind_key = (api_version, match["plural"])
            if match["core"]:
                served = True
            elif match["group"] == "kueue.x-k8s.io":
                served = match["version"] in self.kueue_versions
            else:
                served = kind_key in self.served
            if not served:
                return 404, _status(404, "NotFound", f"{api_version} {match['plural']} not served")
            store = self.objects.setdefault(kind_key, {})
            if match["name"] is None:
                if method != "GET":
                    return 405, _status(405, "MethodNotAllowed", method)
                listed = self._list(store, match["ns"], query, api_version)
                accept = str(headers.get("Accept") or "")
                self.accepts.append((path, accept))
                if "as=Table" in accept and match["plural"] == "pods":
                    return listed[0], _pod_table(listed[1], query.get("includeObject", "Metadata"))
                return listed
            key = (match["ns"] or "", match["name"])
            if key not in store:
                return 404, _status(404, "NotFound", f"{match['plural']} {match['name']} not found")
            if method == "GET":
                return 200, copy.deepcopy(store[key])
            if method == "PATCH":
                if headers.get("Content-Type") != "application/merge-patch+json":
                    return 415, _status(415, "UnsupportedMediaType", str(headers.get("Content-Type")))
                patch = json.loads(body)
                current = store[key]
                wanted = (patch.get("metadata") or {}).get("resourceVersion")
                if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
                    return 409, _status(409, "Conflict", "the object has been modified")
                updated = merge_patch(current, patch)
                self.resource_version += 1
                updated["metadata"]["resourceVersion"] = str(self.resource_version)
                store[key] = updated
                for fault in self.lost:
                    if fault.times > 0 and fault.method == method and fault.path == path:
                        fault.times -= 1
                        return LOST, {}
                return 200, copy.deepcopy(updated)
            return 405, _status(405, "MethodNotAllowed", method)

    def _list(
        self, store: dict[tuple[str, str], dict[str, Any]], namespace: str | None, query: dict[str, str],
        api_version: str,
    ) -> tuple[int, dict[str, Any]]:  # fmt: skip
        selector = query.get("labelSelector", "")
        items = [
            copy.deepcopy(obj)
            for (ns, _), obj in sorted(store.items())
            if (namespace is None or ns == namespace)
            and selector_matches(selector, obj["metadata"].get("labels") or {})
        ]
        limit = int(query.get("limit", "0")) or len(items) or 1
        if self.page_size_cap:
            limit = min(limit, self.page_size_cap)
        start = int(query.get("continue", "0") or 0)
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": str(self.resource_version)}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        return 200, {"kind": "List", "apiVersion": api_version, "metadata": metadata, "items": page}


def _pod_table(page: dict[str, Any], include: str) -> dict[str, Any]:
    """The server-side Table of a pod list, as the API server prints it (``kubectl get pods -o wide``): columns
    Name, Ready, Status, Restarts, Age, IP, Node; each row's object is the pod's PartialObjectMetadata with
    ``includeObject=Metadata`` (the default), never its spec."""
    columns = [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
        "Nominated Node",
        "Readiness Gates",
    ]
    rows = []
    for pod in page["items"]:
        status = pod.get("status") or {}
        cells = [pod["metadata"]["name"], "1/1", status.get("phase", "Running"), 0, "1m", status.get("podIP", ""),
                 (pod.get("spec") or {}).get("nodeName") or "<none>", "<none>", "<none>"]  # fmt: skip
        row: dict[str, Any] = {"cells": cells}
        if include == "Metadata":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": pod["metadata"]}  # fmt: skip
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": page["metadata"],
            "columnDefinitions": [{"name": name, "type": "string"} for name in columns], "rows": rows}  # fmt: skip


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message}  # fmt: skip


def _handler_for(fake: FakeKubernetes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _respond(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, payload = fake.handle(self.command, self.path, self.headers, body)
            if status == LOST:  # carried out, but the client never hears so
                self.close_connection = True
                return
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = _respond  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output quiet

    return Handler


def run_fake(fake: FakeKubernetes) -> Iterator[FakeKubernetes]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
