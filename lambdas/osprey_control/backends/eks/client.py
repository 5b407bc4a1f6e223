"""A minimal Kubernetes REST client on the standard library: list (label selector, ``continue`` paging),
get and JSON merge-patch, with TLS pinned to the cluster CA, timeouts and bounded retries.

Only what Osprey needs, so the Lambda carries no ``kubernetes`` package. Plain ``http://`` is accepted for
loopback hosts only (the tests' fake API server); anything else must be ``https://``.

Failures are classified here, where the requests are made (:mod:`osprey_control.errors`): no answer, 429 and
5xx (after this client's own retries) and a 409 conflict are :class:`~osprey_control.errors.TransientError`;
404, 401/403 and any other 4xx are :class:`~osprey_control.errors.PermanentError`.

A 403 has two sources that need different fixes. The authorizer (RBAC, EKS access entries) refuses with a
message of one fixed form, ``User "<name>" cannot <verb> resource ...`` (k8s.io/apiserver
``responsewriters.forbiddenMessage``): that is :class:`UnauthorizedError`, with a hint at docs/eks.md's roles.
Admission refuses *after* authorization succeeded, with reason ``Forbidden`` too: a webhook (``admission webhook
"<name>" denied the request: ...``), a ValidatingAdmissionPolicy (``ValidatingAdmissionPolicy '<name>' ... denied
request: ...``), a ResourceQuota, PodSecurity or a terminating namespace. Sending that operator to RBAC would
be wrong, so any other 403 carrying a Status is :class:`AdmissionDeniedError`, quoting the controller's
message and nothing else. A 403 without a Status (something in front of the API server) keeps the RBAC hint.
"""

from __future__ import annotations

import json
import logging
import random
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from osprey_control.errors import PermanentError, TransientError

__all__ = [
    "AdmissionDeniedError",
    "ConflictError",
    "KubernetesApiError",
    "KubernetesClient",
    "KubernetesRejectedError",
    "KubernetesUnavailableError",
    "NotFoundError",
    "UnauthorizedError",
]

MERGE_PATCH = "application/merge-patch+json"
# A server-side Table, falling back to plain JSON on a server that cannot print one (the rows then are absent).
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_RETRYABLE = frozenset({429, 500, 502, 503, 504})
_MAX_RETRY_AFTER = 10.0
# The authorizer's refusal (k8s.io/apiserver responsewriters.forbiddenMessage), for a resource or a raw path.
_AUTHORIZER_DENIAL = re.compile(r'\bUser "[^"]*" cannot \S+ (?:resource|path) ')
_RBAC_HINT = (
    " (give the Lambda's IAM role an EKS access entry in its group, osprey-discovery, osprey-apply or "
    "osprey-gang-watch, bound in this namespace: docs/eks.md)"
)

logger = logging.getLogger(__name__)


class KubernetesApiError(Exception):
    """The API server refused a request; ``status`` is the HTTP status (0: no answer at all)."""

    def __init__(self, method: str, path: str, status: int, reason: str, message: str) -> None:
        # First: a PermanentError base would set its own default ``reason``; the HTTP reason is the one kept.
        super().__init__(f"{method} {path}: HTTP {status} {reason}: {message}")
        self.method = method
        self.path = path
        self.status = status
        self.reason = reason
        self.message = message


class KubernetesUnavailableError(KubernetesApiError, TransientError):
    """No answer (``status`` 0), 429 or 5xx, still so after the client's retries: worth trying again later."""


class KubernetesRejectedError(KubernetesApiError, PermanentError):
    """A 4xx other than those below: the request itself is invalid, so repeating it cannot succeed."""


class NotFoundError(KubernetesApiError, PermanentError):
    """404: the object, or the whole API group (a CRD that is not installed), does not exist."""


class ConflictError(KubernetesApiError, TransientError):
    """409: the object changed since it was read (stale ``metadata.resourceVersion``); re-read and retry."""


class UnauthorizedError(KubernetesApiError, PermanentError):
    """401, or a 403 from the authorizer: the IAM principal has no access entry or RBAC binding; see docs/eks.md
    for each role's group."""


class AdmissionDeniedError(KubernetesRejectedError):
    """403 from admission (a webhook, a ValidatingAdmissionPolicy, a quota ...), not from RBAC: the request was
    authorized and a cluster policy refused it. Permanent: the same write is refused again; ``message`` is the
    controller's own, which says what it allows."""


def _error_for(method: str, path: str, status: int, body: bytes) -> KubernetesApiError:
    reason, message = "", body[:500].decode("utf-8", "replace")
    is_status = False
    try:
        parsed = json.loads(body)
        if isinstance(parsed, dict):  # a metav1.Status
            reason = str(parsed.get("reason", ""))
            message = str(parsed.get("message", message))
            is_status = "message" in parsed
    except ValueError:
        pass
    if status == 404:
        return NotFoundError(method, path, status, reason or "NotFound", message)
    if status == 409:
        return ConflictError(method, path, status, reason or "Conflict", message)
    if status == 403 and is_status and not _AUTHORIZER_DENIAL.search(message):
        return AdmissionDeniedError(method, path, status, reason or "Forbidden", message)
    if status in (401, 403):
        return UnauthorizedError(method, path, status, reason or "Unauthorized", message + _RBAC_HINT)
    if status in _RETRYABLE:
        return KubernetesUnavailableError(method, path, status, reason, message)
    if 400 <= status < 500:
        return KubernetesRejectedError(method, path, status, reason, message)
    return KubernetesApiError(method, path, status, reason, message)


class KubernetesClient:
    """Talk to one API server. ``token`` is called before every request (it caches, see ``token.py``)."""

    def __init__(
        self,
        server: str,
        *,
        token: Callable[[], str] | None = None,
        ca_pem: str | None = None,
        timeout: float = 10.0,
        max_attempts: int = 4,
        backoff: float = 0.25,
        on_unauthorized: Callable[[], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        parsed = urllib.parse.urlsplit(server)
        if parsed.scheme not in ("https", "http") or not parsed.hostname:
            raise ValueError(f"Kubernetes API server must be an https:// URL, got {server!r}")
        if parsed.scheme == "http" and parsed.hostname not in _LOOPBACK:
            raise ValueError(
                f"refusing plain http to {parsed.hostname}: the bearer token would travel unencrypted; "
                "use the cluster's https:// endpoint"
            )
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.server = server.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._max_attempts = max_attempts
        self._backoff = backoff
        self._on_unauthorized = on_unauthorized
        self._sleep = sleep
        handlers: list[urllib.request.BaseHandler] = []
        if parsed.hostname in _LOOPBACK:
            # An HTTP(S)_PROXY in the environment must never capture loopback traffic.
            handlers.append(urllib.request.ProxyHandler({}))
        if parsed.scheme == "https":
            # Pin to the cluster CA when known: the EKS endpoint's certificate is not publicly trusted.
            context = ssl.create_default_context(cadata=ca_pem) if ca_pem else ssl.create_default_context()
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self._opener = urllib.request.build_opener(*handlers)

    # -- public verbs -------------------------------------------------------------------------------------

    def get(
        self, path: str, params: Mapping[str, str] | None = None, *, accept: str = "application/json"
    ) -> dict[str, Any]:
        return self.request("GET", path, params=params, accept=accept)

    def list(
        self, path: str, *, label_selector: str | None = None, page_size: int = 500
    ) -> Iterator[dict[str, Any]]:
        """Every item of a collection, following ``metadata.continue`` page by page."""
        for page in self._pages(path, label_selector, page_size, {}, "application/json"):
            yield from page.get("items") or []

    def list_table(
        self, path: str, *, label_selector: str | None = None, page_size: int = 500
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """Every row of a collection as the server prints it: ``(metadata, {column name: cell})``.

        The server-side Table (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) with
        ``includeObject=Metadata``: each row carries the object's metadata and its printed columns (a pod's
        ``Node``), never its spec, so a pod's containers, environment values included, are not read.
        """
        extra = {"includeObject": "Metadata"}
        for page in self._pages(path, label_selector, page_size, extra, TABLE_ACCEPT):
            names = [str(column.get("name")) for column in page.get("columnDefinitions") or []]
            for row in page.get("rows") or []:
                metadata = ((row.get("object") or {}).get("metadata")) or {}
                yield metadata, dict(zip(names, row.get("cells") or [], strict=False))

    def _pages(
        self, path: str, label_selector: str | None, page_size: int, extra: Mapping[str, str], accept: str
    ) -> Iterator[dict[str, Any]]:
        params: dict[str, str] = {"limit": str(page_size), **extra}
        if label_selector:
            params["labelSelector"] = label_selector
        while True:
            page = self.get(path, params, accept=accept)
            yield page
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
            params["continue"] = str(token)

    def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """RFC 7386 merge patch; put ``metadata.resourceVersion`` in ``patch`` to make it conditional."""
        return self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    # -- transport ----------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> dict[str, Any]:
        url = self.server + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = json.dumps(body).encode("utf-8") if body is not None else None
        refreshed = False
        attempt = 1
        while True:
            try:
                return self._send(method, url, data, content_type, accept)
            except urllib.error.HTTPError as error:
                status = error.code
                payload = error.read()
                retry_after = error.headers.get("Retry-After") if error.headers else None
                error.close()
                if status == 401 and not refreshed and self._on_unauthorized is not None:
                    # A cached token can lapse early (clock skew): mint one more and try once again.
                    self._on_unauthorized()
                    refreshed = True
                    continue
                failure = _error_for(method, path, status, payload)
                if status not in _RETRYABLE or attempt >= self._max_attempts:
                    raise failure from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                retry_after = None
                reason = getattr(error, "reason", error)
                failure = KubernetesUnavailableError(method, path, 0, "Unreachable", str(reason))
                if attempt >= self._max_attempts:
                    raise failure from None
            delay = self._delay(attempt, retry_after)
            logger.warning(
                "kubernetes request retried",
                extra={"method": method, "path": path, "status": failure.status, "attempt": attempt,
                       "delay_s": round(delay, 3)},
            )  # fmt: skip
            self._sleep(delay)
            attempt += 1

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(max(float(retry_after), 0.0), _MAX_RETRY_AFTER)
            except ValueError:
                pass
        # Full jitter keeps many Lambdas from retrying in lockstep against one API server.
        return random.uniform(0, self._backoff * 2 ** (attempt - 1))

    def _send(
        self, method: str, url: str, data: bytes | None, content_type: str, accept: str
    ) -> dict[str, Any]:
        headers = {"Accept": accept, "User-Agent": "osprey-control"}
        if data is not None:
            headers["Content-Type"] = content_type
        if self._token is not None:
            headers["Authorization"] = "Bearer " + self._token()
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        with self._opener.open(request, timeout=self._timeout) as response:
            raw = response.read()
        if not raw:
            return {}
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            raise KubernetesApiError(method, url, 200, "BadResponse", "expected a JSON object")
        return parsed
