"""slurmrestd credentials from AWS Secrets Manager: a scoped, expiring token (and, only when asked, a signing key).

- **A token** (the recommended form, docs/slurm.md): a timer on the head node runs ``scontrol token
  username=osprey lifespan=S`` for a user that may change priorities and nothing more, and stores its output in
  the secret. The secret string is the token itself, the line ``SLURM_JWT=<token>`` that ``scontrol token``
  prints, or JSON ``{"token": ..., "username": ...}``. A token must carry ``exp`` (a token that never expires
  is refused); one that has expired is reported as such (the rotation stopped) after the secret is read again.
- **The signing key** (``jwt_hs256.key``): JSON ``{"jwt_key": "<base64>", "username": ...}`` or the key's raw
  bytes (a binary secret). The key mints tokens for *any* user, root included, so a leaked secret is the
  whole cluster: it is refused unless the bridge is configured with ``allowSigningKey`` (AWS PCS, where the key
  is what the service hands out). Osprey then mints its own 15-minute HS256 tokens for the configured user only.

The user is the secret's ``username`` or the configured default. The secret is read once per warm container
and again after slurmrestd refuses a credential (:meth:`SecretCredentials.invalidate`), when a stored token is
within a minute of its ``exp``, or when a minted token is within a minute of expiring.
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

__all__ = ["SecretCredentials", "mint_token", "parse_secret", "token_expiry"]

_MINTED_LIFESPAN = 900  # seconds; the source renews a minute before the end
_RENEW_BEFORE = 60  # seconds before a token's exp at which the secret is read again


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


def token_expiry(token: str) -> int | None:
    """The ``exp`` claim of a JWT (not verified: slurmctld does that), or None when it has none or is not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    expiry = claims.get("exp") if isinstance(claims, dict) else None
    return expiry if isinstance(expiry, int) and not isinstance(expiry, bool) else None


def _bad(message: str) -> PermanentError:
    return PermanentError(f"slurmrestd secret: {message}", reason="bad-secret")


class SecretCredentials:
    """A :data:`~osprey_control.backends.slurm.client.CredentialSource` over one Secrets Manager secret (module docs)."""

    def __init__(
        self,
        secret_id: str,
        *,
        default_user: str = "slurm",
        allow_signing_key: bool = False,
        client: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.secret_id = secret_id
        self.default_user = default_user
        self.allow_signing_key = allow_signing_key
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
            now = self._clock()
            if self._cached is not None and self._cached[1] is not None:
                expiry = token_expiry(self._cached[1])
                if expiry is not None and expiry - now < _RENEW_BEFORE:
                    self._cached = None  # the rotation job may have stored the next token already
            if self._cached is None:
                self._cached = parse_secret(self._read(), self.default_user)
            user, token, key = self._cached
            if token is not None:
                return SlurmCredentials(user, self._checked(token, now))
            assert key is not None
            if not self.allow_signing_key:
                raise _bad(
                    f"secret {self.secret_id} holds the JWT signing key, which mints tokens for any user (root "
                    "included); store a token from `scontrol token username=<user> lifespan=<s>` instead "
                    "(docs/slurm.md), or set allowSigningKey: true to accept the key"
                )
            if self._minted is None or self._minted[1] - now < 60:
                minted = SlurmCredentials(user, mint_token(key, user, now=now))
                self._minted = (minted, now + _MINTED_LIFESPAN)
            return self._minted[0]

    def _checked(self, token: str, now: float) -> str:
        expiry = token_expiry(token)
        if expiry is None:
            raise _bad(
                f"the token in secret {self.secret_id} has no exp claim (it never expires); store one from "
                "`scontrol token username=<user> lifespan=<s>`"
            )
        if expiry <= now:
            self._cached = None  # read the secret again on the next call: the rotation may catch up
            raise PermanentError(
                f"slurmrestd secret: the token in {self.secret_id} expired {int(now - expiry)} s ago; the job that "
                "rotates it (docs/slurm.md, step 4) has stopped",
                reason="token-expired",
            )
        return token

    def _read(self) -> str | bytes:
        self._client = client_for("secretsmanager", self._client)
        with classified():
            answer = self._client.get_secret_value(SecretId=self.secret_id)
        if "SecretString" in answer:
            return str(answer["SecretString"])
        return bytes(answer["SecretBinary"])
