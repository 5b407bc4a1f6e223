"""The job registry on one DynamoDB table (layout in docs/registry.md).

Items, all in one table keyed ``pk`` / ``sk`` (table in docs/registry.md): the job (``JOB#<backend>#<native
id>`` / ``META``, a :class:`JobRecord` with its ``version``), its decisions (``DECISION#<time>#<version>``, with a
``ttl``), the jobs an instance runs (``INSTANCE#<id>`` / ``JOB#...``) and the instance's spot risk (``RISK``).

The sparse global index ``active-jobs`` (hash ``active_shard``, range ``pk``, projection ALL) holds exactly the
active jobs, so :meth:`JobRegistry.list_active` is one Query per shard, never a Scan. The sparse index
``apply-pending`` (hash ``apply_pending_shard``, range ``pk``, keys only) holds the active jobs whose derived
priority is not on the backend yet (:meth:`JobRegistry.pending_keys`, the apply step's work list); every
job-item write sets or removes its attribute from the record it writes.

Every write of a job item is conditional on the ``version`` read (optimistic concurrency).
:meth:`JobRegistry.apply_observation`, :meth:`JobRegistry.mark_spot_risk` and the apply step's
:meth:`JobRegistry.record_applied` / :meth:`JobRegistry.record_apply_failure` re-read and retry on conflict
(their merge is convergent, see :mod:`osprey_control.registry.observation`); :meth:`JobRegistry.record_decision`
does not retry: it raises :class:`VersionConflictError` so the caller derives again from fresh state, and it
writes only when the decision changes something (:func:`decision_changes`).

Those three take an optional ``fence`` (:class:`osprey_control.registry.fence.Fence`): the write is then a
transaction with a ``ConditionCheck`` on the cycle lease's token, and raises
:class:`~osprey_control.registry.fence.FenceLostError`, having written nothing, once another execution holds
the lease.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from osprey_control.errors import TransientError, condition_failed
from osprey_control.registry.apply_state import merge_applied, merge_apply_failure, merge_shadow
from osprey_control.registry.fence import Fence, failed_checks, fenced_transaction
from osprey_control.registry.history import APPLIED, APPLY_FAILED, SHADOW, JobHistory
from osprey_control.registry.instances import InstanceItems
from osprey_control.registry.items import history_item, item_to_record, record_to_item, shard_of
from osprey_control.registry.keys import (
    ACTIVE_INDEX,
    APPLY_PENDING_ATTRIBUTE,
    APPLY_PENDING_INDEX,
    META,
    job_pk,
    key_from_pk,
)
from osprey_control.registry.model import Backend, JobKey, JobRecord, decision_changes
from osprey_control.registry.observation import JobObservation, merge_observation, merge_spot_risk
from osprey_control.registry.table import RegistryTable, create_table

__all__ = ["DEFAULT_SHARDS", "JobRegistry", "VersionConflictError"]

logger = logging.getLogger(__name__)

DEFAULT_SHARDS = 16
DEFAULT_HISTORY_RETENTION = timedelta(days=14)
_UNREAD = object()


class VersionConflictError(Exception):
    """The job changed since it was read: nothing was written."""

    def __init__(self, key: JobKey, expected: int, actual: int | None) -> None:
        self.key, self.expected, self.actual = key, expected, actual
        now = "it no longer exists" if actual is None else f"it is now at version {actual}"
        super().__init__(
            f"job {key} was expected at version {expected} but {now}; nothing was written. "
            "Read the job again with JobRegistry.get() and derive from the fresh record."
        )


class JobNotFoundError(KeyError):
    def __init__(self, key: JobKey) -> None:
        super().__init__(
            f"job {key} is not in the registry; it is registered by its first state-change event"
        )


class RegistryContentionError(TransientError):
    """A convergent update kept losing the race for the same job; the event should be retried later."""


@dataclass(frozen=True, slots=True)
class ApplyResult:
    record: JobRecord
    changed: bool  # False: the registry already held everything the observation says (a duplicate)


class JobRegistry(RegistryTable):
    """Read and write Osprey's jobs. ``client``: a boto3 DynamoDB client (created on first use if None)."""

    def __init__(
        self,
        table_name: str,
        client: Any = None,
        *,
        shards: int = DEFAULT_SHARDS,
        history_retention: timedelta = DEFAULT_HISTORY_RETENTION,
        max_attempts: int = 10,
    ) -> None:
        if not 1 <= shards <= 1000:
            raise ValueError(f"shards must be 1..1000, got {shards}")
        super().__init__(table_name, client)
        self.shards = shards
        self.history_retention = history_retention
        self.max_attempts = max_attempts

    def create_table(self) -> str:
        return create_table(self.client, self.table_name)

    def shard_of(self, key: JobKey) -> int:
        return shard_of(key, self.shards)

    # Reads -----------------------------------------------------------------------------------------------

    def get(self, key: JobKey) -> JobRecord | None:
        item = self._get_item(key)
        return item_to_record(item) if item else None

    def _get_item(self, key: JobKey) -> dict[str, Any] | None:
        response = self.client.get_item(
            TableName=self.table_name,
            Key={"pk": {"S": job_pk(key)}, "sk": {"S": META}},
            ConsistentRead=True,
        )
        item: dict[str, Any] | None = response.get("Item")
        return item

    def _query(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        paginator = self.client.get_paginator("query")
        for page in paginator.paginate(TableName=self.table_name, **kwargs):
            yield from page.get("Items", [])

    def list_active(self, shard: int | None = None, *, backend: Backend | None = None) -> list[JobRecord]:
        """The active jobs of one shard (or of all shards), from the sparse index: Queries only. With
        ``backend``, only that backend's jobs (filtered by DynamoDB: fewer items sent and decoded, same reads)."""
        if shard is not None and not 0 <= shard < self.shards:
            raise ValueError(f"shard must be 0..{self.shards - 1}, got {shard}")
        shards = range(self.shards) if shard is None else (shard,)
        only: dict[str, Any] = {}
        if backend is not None:
            only = {
                "FilterExpression": "#backend = :backend",
                "ExpressionAttributeNames": {"#backend": "backend"},
            }
        records: list[JobRecord] = []
        for number in shards:
            values: dict[str, Any] = {":shard": {"N": str(number)}}
            if backend is not None:
                values[":backend"] = {"S": backend.value}
            items = self._query(
                IndexName=ACTIVE_INDEX,
                KeyConditionExpression="active_shard = :shard",
                ExpressionAttributeValues=values,
                **only,
            )
            records.extend(item_to_record(item) for item in items)
        return records

    def pending_keys(self, shard: int | None = None) -> list[JobKey]:
        """The active jobs of one shard (or of all shards) whose derived priority still has to reach the
        backend, from the sparse ``apply-pending`` index: keys only and eventually consistent, so the caller
        re-reads each job (:meth:`get`) before applying it."""
        if shard is not None and not 0 <= shard < self.shards:
            raise ValueError(f"shard must be 0..{self.shards - 1}, got {shard}")
        keys: list[JobKey] = []
        for number in range(self.shards) if shard is None else (shard,):
            items = self._query(
                IndexName=APPLY_PENDING_INDEX,
                KeyConditionExpression=f"{APPLY_PENDING_ATTRIBUTE} = :shard",
                ExpressionAttributeValues={":shard": {"N": str(number)}},
            )
            keys.extend(key_from_pk(item["pk"]["S"]) for item in items)
        return keys

    @property
    def instances(self) -> InstanceItems:
        """The instances' job links and spot risk (:mod:`osprey_control.registry.instances`)."""
        return InstanceItems(self.table_name, self.client)

    @property
    def events(self) -> JobHistory:
        """The jobs' decision and apply history (:mod:`osprey_control.registry.history`)."""
        return JobHistory(self.table_name, self.client)

    def history(self, key: JobKey, limit: int = 20) -> list[dict[str, Any]]:
        """The most recent recorded decisions of a job, newest first."""
        return self.events.decisions(key, limit=limit)

    # Writes ----------------------------------------------------------------------------------------------

    def _put_job(self, record: JobRecord, expected: int | None, fence: Fence | None = None) -> bool:
        """Write ``record`` at ``expected + 1``; False when the stored version is not ``expected``. With a
        ``fence``, a transaction that also checks the lease token (:class:`FenceLostError` when it moved)."""
        item = record_to_item(record.model_copy(update={"version": (expected or 0) + 1}), shards=self.shards)
        if expected is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {
                "ConditionExpression": "version = :expected",
                "ExpressionAttributeValues": {":expected": {"N": str(expected)}},
            }
        if fence is not None:
            put = {"Put": {"TableName": self.table_name, "Item": item, **condition}}
            return fenced_transaction(self.client, [put], fence) is None
        try:
            self.client.put_item(TableName=self.table_name, Item=item, **condition)
        except Exception as error:
            if condition_failed(error):
                return False
            raise
        return True

    def _expires(self, when: datetime) -> int:
        """The TTL of an item written at ``when``: the history retention later."""
        return int((when + self.history_retention).timestamp())

    def _converge(
        self, key: JobKey, change: Any, *, read: Any = _UNREAD, fence: Fence | None = None
    ) -> ApplyResult | None:
        """Read-modify-write until the conditional put wins. ``change(record)`` → new record, or None to skip.

        ``read``: the record the caller has just read, used for the first attempt instead of reading again.
        """
        for attempt in range(self.max_attempts):
            current: JobRecord | None = read if attempt == 0 and read is not _UNREAD else self.get(key)
            updated: JobRecord | None = change(current)
            if updated is None:
                return None
            if current is not None and updated == current:
                return ApplyResult(current, changed=False)
            if self._put_job(updated, current.version if current else None, fence):
                version = (current.version if current else 0) + 1
                return ApplyResult(updated.model_copy(update={"version": version}), changed=True)
            logger.info("registry write lost a race, retrying", extra={"job": str(key)})
        raise RegistryContentionError(
            f"job {key} changed on every one of {self.max_attempts} attempts; retry the event later"
        )

    def update(
        self, key: JobKey, change: Callable[[JobRecord | None], JobRecord | None]
    ) -> ApplyResult | None:
        """``change(record)`` written, re-read and retried on conflict (None from ``change``: nothing written)."""
        return self._converge(key, change)

    def apply_observation(self, observation: JobObservation) -> ApplyResult:
        """Fold one observed event into the job's record (creating it); duplicates write nothing."""
        # Link the instances before reading their risk: a concurrent spot warning then either finds this job
        # through the link or has already stored the risk this read picks up.
        # Only instances the record does not list yet are linked, so a duplicate event writes nothing.
        current = self.get(observation.key)
        linked = {node.instance_id for node in current.nodes if node.instance_id} if current else set()
        instance_ids = observation.instance_ids - linked
        self.instances.link(observation.key, instance_ids, expires=self._expires(observation.event_time))
        known_risk = self.instances.risk(instance_ids) if instance_ids else {}
        result = self._converge(
            observation.key, lambda record: merge_observation(record, observation, known_risk), read=current
        )
        assert result is not None  # the merge never skips
        return result

    def mark_spot_risk(self, instance_id: str, risk: float, event_time: datetime) -> list[JobKey]:
        """Record ``risk`` (0..1) for an instance and raise it on every job running there; returns those jobs.

        Risk only rises (max): a rebalance recommendation after an interruption warning changes nothing.
        """
        if not 0.0 <= risk <= 1.0:
            raise ValueError(f"spot risk must be within [0, 1], got {risk}")
        self.instances.record_risk(instance_id, risk, event_time, expires=self._expires(event_time))
        raised: list[JobKey] = []
        for key in self.instances.jobs_on(instance_id):

            def change(record: JobRecord | None) -> JobRecord | None:
                if record is None:
                    return None
                return record.model_copy(
                    update={"spot_risk": merge_spot_risk(record.spot_risk, {instance_id: risk})}
                )

            result = self._converge(key, change)
            if result is not None and result.changed:
                raised.append(key)
        return raised

    def record_decision(
        self,
        key: JobKey,
        decision: dict[str, Any],
        derived_priority: int,
        expected_version: int,
        now: datetime,
        *,
        fence: Fence | None = None,
    ) -> JobRecord:
        """Store a derivation's result (``derived_priority``, not yet applied), conditional on
        ``expected_version``, with its history item. Both writes happen in one transaction: on
        :class:`VersionConflictError` neither is written. The apply step records what reached the backend.

        Nothing is written (and the record is returned as read) when the decision changes nothing
        (:func:`decision_changes`) and the item's ``apply-pending`` entry is already right (items written
        before that index existed get it here, once). With a ``fence``, the transaction also checks the lease
        token: :class:`FenceLostError` when another execution holds the lease.
        """
        if not 0 <= derived_priority <= 100:
            raise ValueError(f"derived_priority must be an integer 0..100, got {derived_priority}")
        item = self._get_item(key)
        if item is None:
            raise JobNotFoundError(key)
        current = item_to_record(item)
        if current.version != expected_version:
            raise VersionConflictError(key, expected_version, current.version)
        indexed = APPLY_PENDING_ATTRIBUTE in item
        if not decision_changes(current, decision, derived_priority) and indexed == (
            current.active and current.apply_pending()
        ):
            return current
        previous = current.derived_priority
        updated = current.model_copy(
            update={
                "derived_priority": derived_priority,
                "last_decision": decision,
                "last_changed_at": now if previous != derived_priority else current.last_changed_at,
                "version": expected_version + 1,
            }
        )
        job_item = record_to_item(updated, shards=self.shards)
        expires = self._expires(now)
        history = history_item(current, job_item, previous=previous, now=now, expires=expires)
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": job_item,
                    "ConditionExpression": "version = :expected",
                    "ExpressionAttributeValues": {":expected": {"N": str(expected_version)}},
                }
            },
            {"Put": {"TableName": self.table_name, "Item": history}},
        ]
        if fence is not None:
            conflict = fenced_transaction(self.client, items, fence) is not None
        else:
            try:
                self.client.transact_write_items(TransactItems=items)
                conflict = False
            except Exception as error:
                if not any(failed_checks(error) or ()):
                    raise
                conflict = True
        if conflict:
            latest = self.get(key)
            raise VersionConflictError(key, expected_version, latest.version if latest else None)
        return updated

    def record_applied(
        self, key: JobKey, priority: int, now: datetime, *, fence: Fence | None = None, detail: str = ""
    ) -> JobRecord | None:
        """The apply step confirmed ``priority`` on the backend (None: the job left the registry).

        Conditional on the version read and retried on conflict (the merge only sets the applied fields, so
        re-reading and merging again is safe); never touches the derived priority or the decision. With a
        ``fence``: :class:`FenceLostError` (nothing written) when another execution holds the lease. The
        outcome also goes into the job's history (``detail``: what the backend now holds).
        """
        result = self._converge(key, lambda record: merge_applied(record, priority, now), fence=fence)
        if result is not None:
            self._note_apply(key, priority, APPLIED, detail or "applied", now, fence=fence)
        return result.record if result else None

    def record_shadow(
        self, key: JobKey, priority: int, detail: str, now: datetime, *, fence: Fence | None = None
    ) -> JobRecord | None:
        """Shadow mode: ``priority`` is what the apply step would have written (nothing was). Written, with a
        ``shadow`` line in the history, only when it is a new value; the job stays pending (docs/deploy.md)."""
        result = self._converge(key, lambda record: merge_shadow(record, priority, now), fence=fence)
        if result is not None and result.changed:
            self._note_apply(key, priority, SHADOW, detail, now, fence=fence)
        return result.record if result else None

    def _note_apply(
        self, key: JobKey, priority: int, outcome: str, detail: str, now: datetime, *, fence: Fence | None
    ) -> None:
        """The history's line for an apply outcome, fenced like the record; best effort: the record above is
        what the cycle needs (a lost fence here is noticed by the next fenced write)."""
        expires = self._expires(now)
        try:
            self.events.record_apply(
                key, priority=priority, outcome=outcome, detail=detail, now=now, expires=expires, fence=fence
            )
        except Exception as error:
            logger.warning(
                "apply outcome not added to the history", extra={"job": str(key), "error": repr(error)}
            )

    def record_apply_failure(
        self,
        key: JobKey,
        priority: int,
        reason: str,
        *,
        permanent: bool,
        now: datetime,
        fence: Fence | None = None,
    ) -> JobRecord | None:
        """The apply step could not put ``priority`` on the backend; see :func:`merge_apply_failure`. With a
        ``fence``: :class:`FenceLostError` (nothing written) when another execution holds the lease."""
        result = self._converge(
            key,
            lambda record: merge_apply_failure(record, priority, reason, permanent=permanent, now=now),
            fence=fence,
        )
        if result is not None:
            self._note_apply(key, priority, APPLY_FAILED, reason, now, fence=fence)
        return result.record if result else None
