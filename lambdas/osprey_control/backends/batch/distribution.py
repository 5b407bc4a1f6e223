"""One scheduling policy's ``fairsharePolicy`` as read, edited in memory and written back at most once a cycle
(one ``UpdateSchedulingPolicy``), with retries of throttling and 5xx.

The update replaces the whole policy, so everything Osprey does not set is sent back exactly as it was read:
entries of other share identifiers (their dicts untouched), ``shareDecaySeconds`` and ``computeReservation``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from osprey_control.errors import is_transient
from osprey_control.registry import ShareEntry

__all__: list[str] = []

logger = logging.getLogger(__name__)

# UpdateSchedulingPolicy tries (botocore's own retries come on top of these for a real client); the waits
# double from the first, with jitter, so a throttled policy costs at most a few seconds of the cycle.
UPDATE_ATTEMPTS = 4
FIRST_BACKOFF_S = 0.25


def covered_by_wildcard(share: str, distribution: Iterable[Mapping[str, Any]]) -> str | None:
    """The wildcard entry (``team*``) whose prefix covers ``share``, which Batch rejects as overlapping."""
    for entry in distribution:
        identifier = str(entry.get("shareIdentifier", ""))
        if identifier.endswith("*") and share.startswith(identifier[:-1]):
            return identifier
    return None


class PolicyEdit:
    """The policy ``arn`` as DescribeSchedulingPolicies returned it, and Osprey's edits of its entries."""

    def __init__(self, arn: str, policy: Mapping[str, Any]) -> None:
        self.arn = arn
        self.fairshare: dict[str, Any] = dict(policy.get("fairsharePolicy") or {})
        self.distribution: list[dict[str, Any]] = [
            dict(entry) for entry in self.fairshare.get("shareDistribution") or ()
        ]
        self._index = {str(entry["shareIdentifier"]): entry for entry in self.distribution}
        self.changed = False
        self.removed: set[str] = set()
        # The shares set by this edit: their weight and whether it differs from the one read.
        self.set_weights: dict[str, tuple[float, bool]] = {}
        self.claims: list[ShareEntry] = []  # entries Osprey takes (new ones, or a new job's): for the ledger

    def has(self, share: str) -> bool:
        return share in self._index

    def weight(self, share: str) -> Any:
        entry = self._index.get(share)
        return None if entry is None else entry.get("weightFactor")

    def wildcard_over(self, share: str) -> str | None:
        return covered_by_wildcard(share, self.distribution)

    def put(self, share: str, weight: float) -> None:
        """Give ``share`` the ``weightFactor`` ``weight`` (adding its entry); a weight in place is no change."""
        entry = self._index.get(share)
        self.set_weights[share] = (weight, entry is None or entry.get("weightFactor") != weight)
        if entry is None:
            entry = {"shareIdentifier": share}
            self.distribution.append(entry)
            self._index[share] = entry
        if entry.get("weightFactor") != weight:
            entry["weightFactor"] = weight
            self.changed = True

    def remove(self, shares: Iterable[str]) -> set[str]:
        """Take the entries of ``shares`` out; the ones that were there."""
        gone = {share for share in shares if share in self._index}
        if gone:
            self.distribution = [e for e in self.distribution if str(e["shareIdentifier"]) not in gone]
            for share in gone:
                del self._index[share]
            self.removed |= gone
            self.changed = True
        return gone

    def request(self) -> dict[str, Any]:
        """The ``fairsharePolicy`` of the UpdateSchedulingPolicy: as read, with the edited distribution."""
        return {**self.fairshare, "shareDistribution": self.distribution}


def holds(edit: PolicyEdit, policy: Mapping[str, Any]) -> bool:
    """Whether ``policy`` (as DescribeSchedulingPolicies returns it) already holds every weight ``edit`` sets
    and none of the entries it removes: what an UpdateSchedulingPolicy that landed leaves, read back after the
    update failed (its answer lost, or a retry of it refused)."""
    distribution = (policy.get("fairsharePolicy") or {}).get("shareDistribution") or ()
    found = {str(entry.get("shareIdentifier")): entry.get("weightFactor") for entry in distribution}
    weights_in_place = all(found.get(share) == weight for share, (weight, _) in edit.set_weights.items())
    return weights_in_place and not any(share in found for share in edit.removed)


def update_with_retry(
    client: Any,
    edit: PolicyEdit,
    on_call: Callable[[], None],
    *,
    sleep: Callable[[float], None] = time.sleep,
    attempts: int = UPDATE_ATTEMPTS,
) -> None:
    """UpdateSchedulingPolicy of ``edit``, retrying transient errors (throttling, 5xx, connection) with
    exponential backoff and jitter; ``on_call`` counts each call made. A permanent error is raised at once,
    a transient one once every try failed."""
    for attempt in range(1, attempts + 1):
        on_call()
        try:
            client.update_scheduling_policy(arn=edit.arn, fairsharePolicy=edit.request())
            return
        except Exception as error:
            if attempt == attempts or not is_transient(error):
                raise
            wait = FIRST_BACKOFF_S * 2 ** (attempt - 1) * (0.5 + random.random() / 2)
            logger.info(
                "UpdateSchedulingPolicy retried",
                extra={"policy": edit.arn, "attempt": attempt, "error": repr(error), "wait_s": wait},
            )
            sleep(wait)
