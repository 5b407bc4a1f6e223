"""Policies as the CDK app stored them: one SSM String parameter per policy, ``<prefix>/<name>``, holding the
policy's canonical JSON. Read with one paginated GetParametersByPath per ``max_age``.

One bad parameter harms only its own jobs (docs/decisions.md, "A bad policy harms only its own jobs"). Each
value is parsed on its own through the bounded reader (:func:`osprey_control.policy.parse_stored_policy`: size
and nesting refused before the JSON decoder runs), and anything a value makes go wrong, a schema error or an
exception nobody foresaw, marks that policy invalid instead of failing the caller. An invalid policy's jobs
are derived under its *last good version*: the newest earlier version of the parameter (GetParameterHistory,
which SSM keeps for the last 100 versions) that is valid, else the version this container last read as valid.
Without one, :meth:`PolicySource.get` raises :class:`~osprey_control.policy.InvalidPolicyError` and the jobs
keep their last applied priority. :meth:`PolicySource.invalid_policies` lists the invalid ones for the steps'
outputs, metrics and logs and for ``osprey jobs``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from osprey_control.aws import client_for
from osprey_control.derivation import CompiledPolicy, compile_policy
from osprey_control.policy import (
    InvalidPolicy,
    InvalidPolicyError,
    PriorityDerivationPolicy,
    StoredPolicyError,
    parse_stored_policy,
)
from osprey_control.wiring import POLICY_PREFIX

__all__ = ["DEFAULT_MAX_AGE_SECONDS", "InvalidPolicyError", "PolicySource", "UnknownPolicyError"]

DEFAULT_MAX_AGE_SECONDS = 60
# GetParameterHistory pages (50 versions each): SSM keeps 100 versions, so 3 pages always reach the oldest.
_HISTORY_PAGES = 3

logger = logging.getLogger(__name__)


class UnknownPolicyError(LookupError):
    """A job names a policy that is not deployed: permanent for that job until someone deploys it."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        super().__init__(
            f"policy {name!r} is not deployed (known: {', '.join(known) or 'none'}); add it to policies/ and "
            "deploy, or run `osprey policy apply`"
        )


@dataclass(frozen=True)
class _Entry:
    """One usable version of a policy: the stored value it came from, its parameter version, compiled."""

    raw: str
    version: int
    compiled: CompiledPolicy
    model: PriorityDerivationPolicy


@dataclass(frozen=True)
class _Refused:
    """An invalid stored value, kept so the same value is neither parsed nor looked up in history again."""

    raw: str
    invalid: InvalidPolicy
    fallback: _Entry | None


def _problem(error: Exception) -> str:
    if isinstance(error, StoredPolicyError):
        return str(error)
    return f"{type(error).__name__}: {str(error)[:200]}"  # not foreseen: still only this policy's problem


class PolicySource:
    """Compiled policies by name, refreshed at most every ``max_age`` seconds; a parameter that does not hold a
    valid policy is listed in :attr:`invalid` and never hides the others."""

    def __init__(
        self, prefix: str = POLICY_PREFIX, *, client: Any = None, max_age: int = DEFAULT_MAX_AGE_SECONDS
    ) -> None:
        self._prefix = prefix.rstrip("/")
        self._client = client
        self._max_age = max_age
        self._fetched: dict[str, tuple[str, int]] | None = None
        self._fetched_at = 0.0
        # One snapshot, replaced whole: the derive step looks policies up from many threads at once, and a
        # reader must never see a policy moved out of one map and not yet into the other.
        self._state: tuple[dict[str, _Entry], dict[str, _Refused]] = ({}, {})
        self._lock = threading.Lock()  # one refresh at a time (and one GetParametersByPath per max_age)
        self.invalid: dict[str, InvalidPolicy] = {}

    def _fetch(self) -> tuple[dict[str, tuple[str, int]], bool]:
        """Every parameter under the prefix as ``name -> (value, version)``, and whether it was read now."""
        now = time.monotonic()
        if self._fetched is not None and now - self._fetched_at < self._max_age:
            return self._fetched, False
        self._client = client_for("ssm", self._client)
        found: dict[str, tuple[str, int]] = {}
        for page in self._client.get_paginator("get_parameters_by_path").paginate(
            Path=self._prefix, Recursive=False
        ):
            for parameter in page.get("Parameters", ()):
                name = str(parameter["Name"]).rsplit("/", 1)[-1]
                found[name] = (str(parameter["Value"]), int(parameter.get("Version", 0)))
        self._fetched, self._fetched_at = found, now
        return found, True

    def _refresh(self) -> tuple[dict[str, _Entry], dict[str, _Refused]]:
        """The current snapshot (valid entries, refused ones), rebuilt first when ``max_age`` has passed."""
        with self._lock:
            fetched, fresh = self._fetch()
            if fresh:
                self._rebuild(fetched)
            return self._state

    def _rebuild(self, fetched: dict[str, tuple[str, int]]) -> None:
        old_valid, old_refused = self._state
        valid: dict[str, _Entry] = {}
        refused: dict[str, _Refused] = {}
        for name, (raw, version) in fetched.items():
            known = old_valid.get(name)
            if known is not None and known.raw == raw:  # unchanged: no parsing, no compiling
                valid[name] = known
                continue
            seen = old_refused.get(name)
            if seen is not None and seen.raw == raw:
                refused[name] = seen
                continue
            try:
                valid[name] = self._entry(name, raw, version)
            except Exception as error:
                previous = known or (seen.fallback if seen is not None else None)
                refused[name] = self._refuse(name, raw, version, _problem(error), previous)
        self._state = (valid, refused)
        self.invalid = {name: entry.invalid for name, entry in sorted(refused.items())}

    def _source(self, name: str) -> str:
        return f"ssm:{self._prefix}/{name}"

    def _entry(self, name: str, raw: str, version: int) -> _Entry:
        policy = parse_stored_policy(raw, name, self._source(name))
        return _Entry(raw, version, compile_policy(policy), policy)

    def _refuse(self, name: str, raw: str, version: int, error: str, previous: _Entry | None) -> _Refused:
        fallback, note = self._last_good(name, version)
        if fallback is None and note:
            fallback = previous  # history unreadable: the version this container last held as valid
        text = f"{error}{note}" if fallback is None else error
        invalid = InvalidPolicy(name, text, fallback.version if fallback is not None else None)
        logger.warning("invalid stored policy", extra={"policy": name, "error": invalid.describe()})
        return _Refused(raw, invalid, fallback)

    def _last_good(self, name: str, bad_version: int) -> tuple[_Entry | None, str]:
        """The newest valid version older than ``bad_version``, and a note when the history could not be read."""
        versions: list[tuple[int, str]] = []
        try:
            pages = self._client.get_paginator("get_parameter_history").paginate(
                Name=f"{self._prefix}/{name}", PaginationConfig={"MaxItems": 50 * _HISTORY_PAGES}
            )
            for page in pages:
                versions.extend((int(p["Version"]), str(p.get("Value", ""))) for p in page["Parameters"])
        except Exception as error:
            logger.warning("policy history unreadable", extra={"policy": name, "error": str(error)})
            return None, f" (its history could not be read: {type(error).__name__})"
        for version, raw in sorted(versions, reverse=True):
            if version >= bad_version and bad_version:
                continue
            try:
                return self._entry(name, raw, version), ""
            except Exception:
                continue
        return None, ""

    def _usable(self, name: str) -> _Entry:
        valid, refused_by_name = self._refresh()
        entry = valid.get(name)
        if entry is not None:
            return entry
        refused = refused_by_name.get(name)
        if refused is None:
            raise UnknownPolicyError(name, self.names())
        if refused.fallback is None:
            raise InvalidPolicyError(refused.invalid)
        return refused.fallback

    def names(self) -> list[str]:
        """The policies jobs can be derived under: the valid ones and the invalid ones with a last good version."""
        valid, refused_by_name = self._refresh()
        usable = [name for name, refused in refused_by_name.items() if refused.fallback is not None]
        return sorted([*valid, *usable])

    def get(self, name: str) -> CompiledPolicy:
        """The compiled policy (its last good version if the stored one is invalid), :class:`UnknownPolicyError`
        or :class:`~osprey_control.policy.InvalidPolicyError`."""
        return self._usable(name).compiled

    def model(self, name: str) -> PriorityDerivationPolicy:
        return self._usable(name).model

    def invalid_policies(self) -> dict[str, InvalidPolicy]:
        """The deployed policies whose stored value is refused, by name, as of a refresh made now if due."""
        _, refused = self._refresh()
        return {name: entry.invalid for name, entry in sorted(refused.items())}
