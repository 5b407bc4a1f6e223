"""A small slurmrestd client (OpenAPI ``v0.0.38``, Slurm 22.05 to 23.02): standard library HTTP only.

slurmrestd authenticates each request with two headers, ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN`` (a
JWT, :mod:`osprey_control.backends.slurm.token`). Its answers need care, and this module is where that care lives:

- a request Slurm refused answers **HTTP 200** (``Priority must be >0``) or 500 (``Invalid job id
  specified`` on an update) with a non-empty ``errors`` list; that list, not the status, decides:
  :func:`raise_for_errors` turns it into a classified error;
- a missing token answers 401 (a credential to fix: permanent); a refused token and a stopped slurmctld
  both answer 500 with one ``Unspecified error`` and no Slurm error number (measured on 22.05.8), so that
  answer is transient and makes the credential source read its secret again;
- no answer, a timeout, 429, 502/503/504, or a Slurm error that means "the controller is busy or unreachable"
  (``_TRANSIENT_SLURM_ERRORS``) are transient.

Every request carries the token, so the transport is strict about where it goes (docs/slurm.md, "Securing the
bridge"): ``https://`` with certificate verification (the system CAs, or the cluster's own CA in PEM), plain
``http://`` only when the caller passes ``allow_insecure_http=True``; a redirect is never followed (the token would
go to wherever ``Location`` points) and is reported as a configuration error; and an answer larger than
``max_response_bytes`` is refused rather than read into the function's memory.

Every failure is an :mod:`osprey_control.errors` type, so callers decide by type (docs/decisions.md, Error
taxonomy).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osprey_control.errors import PermanentError, ThrottledError, TransientError

__all__ = [
    "API_VERSION",
    "MAX_RESPONSE_BYTES",
    "SlurmApiError",
    "SlurmClient",
    "SlurmCredentials",
    "SlurmRejectedError",
    "SlurmUnavailableError",
    "raise_for_errors",
]

API_VERSION = "v0.0.38"
# A v0.0.38 job is 3-5 KB of JSON, so 64 MiB is about 15,000 jobs in one listing (slurmctld keeps finished jobs
# for MinJobAge, 300 s by default): far above a ParallelCluster's queue, and well inside the bridge's memory.
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
_ERROR_BODY_BYTES = 1_000_000

# Slurm error numbers (slurm_errno.h) that describe the controller's state, not the request: worth retrying.
_TRANSIENT_SLURM_ERRORS = frozenset(
    {
        11,  # EAGAIN: resource temporarily unavailable
        1007, 1008, 1009, 1010, 1011,  # SLURM_COMMUNICATIONS_*: cannot reach or talk to slurmctld
        1012,  # SLURM_UNEXPECTED_MSG_ERROR
        2018,  # ESLURM_TRANSITION_STATE_NO_UPDATE: job is completing or configuring
        2047,  # ESLURM_IN_STANDBY_MODE: the backup controller is taking over
        5004,  # SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT
        5005,  # SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT
        7000,  # ESLURMD_... / ESLURM_NOT_LEADER ranges of a controller fail-over
    }
)  # fmt: skip
# Slurm error numbers that say the job is gone: the caller treats them as "finished", not as a fault.
INVALID_JOB = 2017  # ESLURM_INVALID_JOB_ID
ALREADY_DONE = 2021  # ESLURM_ALREADY_DONE


class SlurmApiError(Exception):
    """Base of this client's errors; ``numbers`` are the Slurm error numbers of the answer, if any."""

    numbers: tuple[int, ...] = ()


class SlurmRejectedError(SlurmApiError, PermanentError):
    """Slurm refused the request itself (invalid job, value, permission, credential): repeating it cannot help."""

    def __init__(self, message: str, numbers: Sequence[int] = (), *, reason: str = "rejected") -> None:
        PermanentError.__init__(self, message, reason=reason)
        self.numbers = tuple(numbers)

    @property
    def job_gone(self) -> bool:
        return INVALID_JOB in self.numbers or ALREADY_DONE in self.numbers


class SlurmUnavailableError(SlurmApiError, TransientError):
    """No answer, or an answer meaning "later" (5xx, controller unreachable or busy)."""

    def __init__(self, message: str, numbers: Sequence[int] = ()) -> None:
        TransientError.__init__(self, message)
        self.numbers = tuple(numbers)


class SlurmThrottledError(SlurmUnavailableError, ThrottledError):
    pass


def _number(entry: Mapping[str, Any]) -> int:
    raw = entry.get("error_number", entry.get("error_code", -1))
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else -1


def raise_for_errors(body: Mapping[str, Any], what: str) -> None:
    """Raise the classified error an answer's ``errors`` list describes (HTTP 200 or 500 alike); nothing if
    the list is empty."""
    errors = [entry for entry in body.get("errors") or [] if isinstance(entry, Mapping)]
    if not errors:
        return
    numbers = [_number(entry) for entry in errors]
    text = "; ".join(
        f"{entry.get('error') or 'error'}"
        + (f" ({entry['description']})" if entry.get("description") else "")
        + (f" [{_number(entry)}]" if _number(entry) >= 0 else "")
        for entry in errors
    )
    message = f"{what}: slurmrestd answered {text}"
    if any(number in _TRANSIENT_SLURM_ERRORS for number in numbers):
        raise SlurmUnavailableError(
            message + " (the controller is busy or unreachable; retried later)", numbers
        )
    raise SlurmRejectedError(message, numbers)


@dataclass(frozen=True)
class SlurmCredentials:
    """Who slurmrestd acts as: ``user_name`` and a JWT for that user."""

    user_name: str
    token: str

    def __repr__(self) -> str:  # never print the token
        return f"SlurmCredentials(user_name={self.user_name!r}, token=<{len(self.token)} chars>)"


CredentialSource = Callable[[], SlurmCredentials]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Turns every 3xx into an HTTPError: following it would send the token to the ``Location``'s host."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class SlurmClient:
    """``url`` is slurmrestd's base URL (``https://10.0.0.10:6820``); ``credentials`` returns the current
    user name and token (called on every request, so a rotated secret is picked up by the source's cache).

    ``ca_pem`` is the PEM of the CA that signed slurmrestd's (or its TLS proxy's) certificate, when it is not
    one the system trusts; ``allow_insecure_http`` is the only way to use ``http://`` (a loopback test cluster,
    or a network the operator has decided to trust: the token then travels in clear)."""

    def __init__(
        self,
        url: str,
        credentials: CredentialSource,
        *,
        timeout: float = 10.0,
        on_unauthorized: Callable[[], None] | None = None,
        version: str = API_VERSION,
        allow_insecure_http: bool = False,
        ca_pem: str | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if url.startswith("http://"):
            if not allow_insecure_http:
                raise ValueError(
                    f"slurmrestd url {url!r} is plain http://, which sends the JWT in clear: use https:// "
                    "(slurmrestd behind a TLS proxy, docs/slurm.md), or set insecureHttp: true to accept that"
                )
        elif not url.startswith("https://"):
            raise ValueError(
                f"slurmrestd url must start with https:// (or http:// with insecureHttp), got {url!r}"
            )
        if max_response_bytes < 1:
            raise ValueError(f"max_response_bytes must be at least 1, got {max_response_bytes}")
        self.url = url.rstrip("/")
        self.credentials = credentials
        self.timeout = timeout
        self.on_unauthorized = on_unauthorized
        self.version = version
        self.max_response_bytes = max_response_bytes
        context = ssl.create_default_context(cadata=ca_pem) if ca_pem else ssl.create_default_context()
        self._opener = urllib.request.build_opener(
            _NoRedirect(), urllib.request.HTTPSHandler(context=context)
        )

    # -- the calls Osprey makes ------------------------------------------------------------------------

    def jobs(self) -> list[dict[str, Any]]:
        """Every job slurmctld still knows (pending, running and recently finished)."""
        return list(self._call("GET", "/jobs", what="list jobs").get("jobs") or [])

    def job(self, job_id: int | str) -> dict[str, Any] | None:
        """One job, or None when slurmctld no longer knows it (ended and purged, or never existed)."""
        try:
            jobs = self._call("GET", f"/job/{_job_id(job_id)}", what=f"read job {job_id}").get("jobs") or []
        except SlurmRejectedError as error:
            if error.job_gone:
                return None
            raise
        return dict(jobs[0]) if jobs else None

    def nodes(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/nodes", what="list nodes").get("nodes") or [])

    def update_job(self, job_id: int | str, fields: Mapping[str, Any]) -> None:
        """``POST /job/{id}`` with ``fields`` (``{"priority": N}``, ``{"comment": ...}``)."""
        self._call("POST", f"/job/{_job_id(job_id)}", body=dict(fields), what=f"update job {job_id}")

    def submit(self, script: str, job: Mapping[str, Any]) -> int:
        """Submit a batch job; its id. ``job`` needs ``environment`` and ``current_working_directory``."""
        answer = self._call("POST", "/job/submit", body={"script": script, "job": dict(job)}, what="submit")
        job_id = answer.get("job_id")
        if not isinstance(job_id, int):
            raise SlurmRejectedError(f"submit: slurmrestd answered no job_id ({answer!r:.200})")
        return job_id

    def cancel(self, job_id: int | str) -> None:
        self._call("DELETE", f"/job/{_job_id(job_id)}", what=f"cancel job {job_id}")

    def ping(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/ping", what="ping").get("pings") or [])

    # -- transport ---------------------------------------------------------------------------------------

    def _call(
        self, method: str, path: str, *, what: str, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        credentials = self.credentials()
        if not credentials.token.strip() or not credentials.user_name.strip():
            raise SlurmRejectedError(
                f"{what}: no slurmrestd token or user name (check the JWT secret)", reason="unauthorized"
            )
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}/slurm/{self.version}{path}",
            data=data,
            method=method,
            headers={
                "X-SLURM-USER-NAME": credentials.user_name,
                "X-SLURM-USER-TOKEN": credentials.token,
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = self._bounded_read(response, what)
        except urllib.error.HTTPError as error:
            raise self._http_error(error, what) from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, ssl.SSLCertVerificationError):
                raise SlurmRejectedError(
                    f"{what}: slurmrestd's certificate at {self.url} does not verify ({error.reason.verify_message}):"
                    " set caCertificate to the PEM of the CA that signed it",
                    reason="tls",
                ) from None
            raise SlurmUnavailableError(f"{what}: no answer from slurmrestd at {self.url}: {error}") from None
        except (TimeoutError, ConnectionError) as error:
            raise SlurmUnavailableError(f"{what}: no answer from slurmrestd at {self.url}: {error}") from None
        try:
            answer = json.loads(raw or b"{}")
        except ValueError:
            raise SlurmUnavailableError(f"{what}: slurmrestd answered something that is not JSON") from None
        if not isinstance(answer, dict):
            raise SlurmRejectedError(
                f"{what}: slurmrestd answered a JSON {type(answer).__name__}, not an object"
            )
        raise_for_errors(answer, what)
        return answer

    def _bounded_read(self, response: Any, what: str) -> bytes:
        declared = response.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_response_bytes:
            raise self._too_large(what, int(declared))
        raw = bytes(response.read(self.max_response_bytes + 1))
        if len(raw) > self.max_response_bytes:
            raise self._too_large(what, len(raw))
        return raw

    def _too_large(self, what: str, size: int) -> SlurmRejectedError:
        return SlurmRejectedError(
            f"{what}: slurmrestd's answer is over {self.max_response_bytes} bytes ({size} read); not read further "
            "(a listing that large means slurmctld keeps many finished jobs: lower MinJobAge, or raise "
            "maxResponseBytes and the bridge's memory)",
            reason="response-too-large",
        )

    def _http_error(self, error: urllib.error.HTTPError, what: str) -> SlurmApiError:
        if 300 <= error.code < 400:
            return SlurmRejectedError(
                f"{what}: slurmrestd answered a redirect (HTTP {error.code} to "
                f"{error.headers.get('Location', '?')!r}); Osprey never follows one with its token: set the url "
                "to the address that answers",
                reason="redirect",
            )
        raw = error.read(_ERROR_BODY_BYTES)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        # slurmrestd also answers 500 with the usual body when Slurm refused (an unknown job id): its errors
        # list, not the status, says what happened.
        if isinstance(body, dict) and body.get("errors"):
            numbers = [_number(entry) for entry in body["errors"] if isinstance(entry, Mapping)]
            if error.code >= 500 and all(number < 0 for number in numbers):
                # "Unspecified error" with no number: measured for both a stopped slurmctld and a refused token
                # (slurmrestd v0.0.38 drops the errno). Retrying is right for the first; re-reading the secret
                # for the second.
                if self.on_unauthorized is not None:
                    self.on_unauthorized()
                return SlurmUnavailableError(
                    f"{what}: slurmrestd answered HTTP {error.code} without a Slurm error number: slurmctld is "
                    "unreachable or the token was refused (slurmrestd does not say which); the secret is read "
                    "again and the call retried"
                )
            try:
                raise_for_errors(body, f"{what} (HTTP {error.code})")
            except SlurmApiError as classified_error:
                return classified_error
        text = raw[:300].decode("utf-8", "replace").strip()
        message = f"{what}: slurmrestd answered HTTP {error.code} {text}"
        if error.code == 401 or (error.code == 500 and "Authentication failure" in text):
            if self.on_unauthorized is not None:
                self.on_unauthorized()  # the next request reads the secret again (it may have rotated)
            return SlurmRejectedError(
                f"{message}: the token or user name was refused; check the JWT secret and its user",
                reason="unauthorized",
            )
        if error.code == 429:
            return SlurmThrottledError(message + " (throttled; retried later)")
        if error.code >= 500:
            return SlurmUnavailableError(message + " (a server-side failure; retried later)")
        return SlurmRejectedError(message)


def _job_id(job_id: int | str) -> str:
    text = str(job_id).strip()
    if not text.isdigit():
        raise ValueError(f"a Slurm job id is a positive integer, got {job_id!r}")
    return text
