"""slurmrestd credentials from AWS Secrets Manager, in either of the two forms AWS clusters provide.

- **A token** (AWS ParallelCluster): a cron job on the head node runs ``scontrol token username=U
  lifespan=S`` and stores its output in a secret. The secret string is the token itself, the line
  ``SLURM_JWT=<token>`` that ``scontrol token`` prints, or JSON ``{"token": ..., "username": ...}``.
- **The signing key** (AWS PCS, or a head node that keeps ``jwt_hs256.key`` in a secret): JSON
  ``{"jwt_key": "<base64>", "username": ...}`` or the key's raw bytes (a binary secret). Osprey then mints
  its own short-lived HS256 token with the claims slurmctld's ``auth/jwt`` checks (``iat``, ``exp``,
  ``sun``), so no token ever needs rotating by hand.

The user is the secret's ``username`` or the configured default. The secret is read once per warm container
and again after slurmrestd refuses a credential (:meth:`SecretCredentials.invalidate`) or when a minted token
is within a minute of expiring.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from osprey_control.aws import client_for
from osprey_control.backends.slurm.client import SlurmCredentials
from osprey_control.errors import PermanentError, classified

__all__ = ["SecretCredentials", "mint_token", "parse_secret"]

_MINTED_LIFESPAN = 900  # seconds; the source renews a minute before the end


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint_token(
    key: bytes, user_name: str, *, lifespan: int = _MINTED_LIFESPAN, now: float | None = None
) -> str:
    """An HS256 JWT for ``user_name`` signed with slurmctld's ``jwt_key``, as ``scontrol token`` makes it."""
    if not key:
        raise ValueError("the JWT signing key is empty")
    issued = int(time.time() if now is None else now)
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"iat": issued, "exp": issued + lifespan, "sun": user_name}
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


def parse_secret(secret: str | bytes, default_user: str) -> tuple[str, str | None, bytes | None]:
    """``(user, token, key)`` from a secret's value: exactly one of token and key is set.

    PermanentError (reason ``bad-secret``) names what was found and what is allowed."""
    if isinstance(secret, bytes):
        return default_user, None, secret
    text = secret.strip()
    if text.startswith("{"):
        try:
            document: Any = json.loads(text)
        except ValueError:
            raise _bad("the secret starts with '{' but is not valid JSON") from None
        if not isinstance(document, dict):
            raise _bad("the secret's JSON must be an object")
        user = str(document.get("username") or document.get("user_name") or default_user)
        if isinstance(document.get("token"), str) and document["token"].strip():
            return user, document["token"].strip(), None
        if isinstance(document.get("jwt_key"), str) and document["jwt_key"].strip():
            try:
                return user, None, base64.b64decode(document["jwt_key"].strip(), validate=True)
            except ValueError:
                raise _bad("jwt_key must be base64") from None
        raise _bad("a JSON secret needs 'token' (a JWT) or 'jwt_key' (the base64 signing key)")
    if text.startswith("SLURM_JWT="):
        text = text.removeprefix("SLURM_JWT=").strip()
    if text.count(".") == 2 and " " not in text:
        return default_user, text, None
    raise _bad("expected a JWT, 'SLURM_JWT=<jwt>', or JSON with 'token' or 'jwt_key'")


def _bad(message: str) -> PermanentError:
    return PermanentError(f"slurmrestd secret: {message}", reason="bad-secret")


class SecretCredentials:
    """A :data:`~osprey_control.backends.slurm.client.CredentialSource` over one Secrets Manager secret (module docs)."""

    def __init__(
        self,
        secret_id: str,
        *,
        default_user: str = "slurm",
        client: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.secret_id = secret_id
        self.default_user = default_user
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[str, str | None, bytes | None] | None = None
        self._minted: tuple[SlurmCredentials, float] | None = None

    def invalidate(self) -> None:
        with self._lock:
            self._cached = None
            self._minted = None

    def __call__(self) -> SlurmCredentials:
        with self._lock:
            if self._cached is None:
                self._cached = parse_secret(self._read(), self.default_user)
            user, token, key = self._cached
            if token is not None:
                return SlurmCredentials(user, token)
            assert key is not None
            now = self._clock()
            if self._minted is None or self._minted[1] - now < 60:
                minted = SlurmCredentials(user, mint_token(key, user, now=now))
                self._minted = (minted, now + _MINTED_LIFESPAN)
            return self._minted[0]

    def _read(self) -> str | bytes:
        self._client = client_for("secretsmanager", self._client)
        with classified():
            answer = self._client.get_secret_value(SecretId=self.secret_id)
        if "SecretString" in answer:
            return str(answer["SecretString"])
        return bytes(answer["SecretBinary"])
