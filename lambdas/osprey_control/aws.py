"""Creating AWS clients the same way everywhere: lazily, with bounded retries and backoff.

Adapters take a boto3 client as a parameter (``client=None`` → created here on first use, never at import),
so tests pass moto- or Stubber-backed clients and the Lambdas share one per container. What the clients raise
is classified by :mod:`osprey_control.errors` (``is_transient`` / ``is_throttling`` are re-exported here).
"""

from __future__ import annotations

from typing import Any

# Whether an AWS failure is worth retrying is decided in one place, osprey_control.errors; these names stay
# importable from here for the modules that used them first.
from osprey_control.errors import is_throttling, is_transient

__all__ = [
    "RETRY_CONFIG",
    "WRITE_RETRY_CONFIG",
    "call_bound_ms",
    "client_for",
    "config_bound_ms",
    "is_throttling",
    "is_transient",
    "retried_bound_ms",
]

# botocore's "standard" mode retries throttling and 5xx with exponential backoff and jitter; 5 attempts in all
# (the first call and 4 retries: botocore's "max_attempts" would count retries only) keeps the worst case well
# inside one cycle.
RETRY_CONFIG: dict[str, Any] = {
    "retries": {"mode": "standard", "total_max_attempts": 5},
    "connect_timeout": 5,
    "read_timeout": 20,
}


# The backend writers' clients (the appliers': Batch, SageMaker, service jobs). A backend write must end, every
# retry included, before the cycle lease expires (docs/control-plane.md, Fencing), so its bound has to fit in the
# time an apply step has (a 120 s function): 3 attempts x (2 s connect + 5 s read) + backoff (1 s + 2 s) = 24 s,
# where RETRY_CONFIG's would be 140 s; Batch's UpdateSchedulingPolicy, retried 4 times by its own loop on top,
# 97.75 s. These control-plane calls answer in well under a second; 5 s is far in their tail.
WRITE_RETRY_CONFIG: dict[str, Any] = {
    "retries": {"mode": "standard", "total_max_attempts": 3},
    "connect_timeout": 2,
    "read_timeout": 5,
}

# botocore's standard mode waits random() * min(2 ** (attempt - 1), 20) s before retry number `attempt`
# (botocore.retries.standard.ExponentialBackoff); its legacy mode's default is 5 attempts in all.
_BACKOFF_BASE_S = 2.0
_MAX_BACKOFF_S = 20.0
_BOTOCORE_TIMEOUT_S = 60.0  # botocore's default connect and read timeouts
_LEGACY_ATTEMPTS = 5


def _backoff_s(attempts: int) -> float:
    return sum(min(_BACKOFF_BASE_S ** (retry - 1), _MAX_BACKOFF_S) for retry in range(1, attempts))


def config_bound_ms(
    *, attempts: int, connect_timeout: float, read_timeout: float, backoff: bool = True
) -> float:
    """How long one botocore call may take at most: every attempt connecting and reading for its full
    timeouts, plus the longest backoff before each retry. The one place this arithmetic is done."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1 (the first request counts), got {attempts}")
    waits = _backoff_s(attempts) if backoff else 0.0
    return 1000.0 * (attempts * (connect_timeout + read_timeout) + waits)


def call_bound_ms(client: Any = None, config: dict[str, Any] | None = None) -> float:
    """:func:`config_bound_ms` of ``client``'s own botocore config (``client.meta.config``), or of ``config``
    (a :data:`RETRY_CONFIG`-shaped dict; default :data:`WRITE_RETRY_CONFIG`) when there is no client."""
    if client is not None:
        meta = client.meta.config
        retries = dict(getattr(meta, "retries", None) or {})
        connect: Any = getattr(meta, "connect_timeout", None)
        read: Any = getattr(meta, "read_timeout", None)
    else:
        chosen = WRITE_RETRY_CONFIG if config is None else config
        retries = dict(chosen.get("retries") or {})
        connect, read = chosen.get("connect_timeout"), chosen.get("read_timeout")
    if "total_max_attempts" in retries:
        attempts = int(retries["total_max_attempts"])
    elif "max_attempts" in retries:  # botocore's max_attempts counts the retries only
        attempts = int(retries["max_attempts"]) + 1
    else:
        attempts = _LEGACY_ATTEMPTS if retries.get("mode", "legacy") == "legacy" else 3
    return config_bound_ms(
        attempts=attempts,
        connect_timeout=float(_BOTOCORE_TIMEOUT_S if connect is None else connect),
        read_timeout=float(_BOTOCORE_TIMEOUT_S if read is None else read),
    )


def retried_bound_ms(one_call_ms: float, attempts: int, first_backoff_s: float) -> float:
    """The bound of a call retried by our own loop ``attempts`` times, waiting at most ``first_backoff_s``
    doubled on each retry (e.g. Batch's UpdateSchedulingPolicy: :mod:`.backends.batch.distribution`)."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    waits = sum(first_backoff_s * 2 ** (retry - 1) for retry in range(1, attempts))
    return float(attempts * one_call_ms + 1000.0 * waits)


def client_for(
    service: str, client: Any = None, *, retry_config: dict[str, Any] | None = None, **kwargs: Any
) -> Any:
    """``client`` if given, else a new boto3 client with ``retry_config`` (default :data:`RETRY_CONFIG`;
    backend writers pass :data:`WRITE_RETRY_CONFIG`). Imports boto3 only then."""
    if client is not None:
        return client
    import boto3  # noqa: PLC0415 - keep boto3 off the import path of pure modules and fast cold starts
    from botocore.config import Config  # noqa: PLC0415

    config = Config(**(RETRY_CONFIG if retry_config is None else retry_config))
    return boto3.client(service, config=config, **kwargs)  # type: ignore[call-overload]
