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

__all__ = ["RETRY_CONFIG", "client_for", "is_throttling", "is_transient"]

# botocore's "standard" mode retries throttling and 5xx with exponential backoff and jitter; 5 attempts in all
# (the first call and 4 retries: botocore's "max_attempts" would count retries only) keeps the worst case well
# inside one cycle.
RETRY_CONFIG: dict[str, Any] = {
    "retries": {"mode": "standard", "total_max_attempts": 5},
    "connect_timeout": 5,
    "read_timeout": 20,
}


def client_for(service: str, client: Any = None, **kwargs: Any) -> Any:
    """``client`` if given, else a new boto3 client with :data:`RETRY_CONFIG` (imports boto3 only then)."""
    if client is not None:
        return client
    import boto3  # noqa: PLC0415 - keep boto3 off the import path of pure modules and fast cold starts
    from botocore.config import Config  # noqa: PLC0415

    return boto3.client(service, config=Config(**RETRY_CONFIG), **kwargs)  # type: ignore[call-overload]
