"""The fair-share entries Osprey added to AWS Batch scheduling policies, so that they can be taken out again.

Batch allows 500 active share identifiers per queue, and Osprey adds its own (``osprey-`` team x size shares, or
a job's own share): without pruning, a busy queue would run out within days. Osprey prunes only what it added:
when the applier creates an entry it records ``(policy, share, job)`` here (``pk = SHARES#batch``,
``sk = <policy ARN>|<share>``), and this record is also what makes an existing entry Osprey's (an entry that was
in the policy before, or that a person re-created, is never recorded, so never changed nor removed:
``backends.batch.ownership``). An entry is finished once its job has ended or has left
the registry (its items expire after the history retention).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from osprey_control.registry.batch import batch_get
from osprey_control.registry.fence import Fence, fenced_transaction
from osprey_control.registry.keys import META, SHARES_PK, job_pk, share_sk
from osprey_control.registry.model import ACTIVE_STATUSES, JobKey, JobStatus
from osprey_control.registry.table import RegistryTable

__all__ = ["ShareEntry", "ShareLedger"]


@dataclass(frozen=True, slots=True)
class ShareEntry:
    """A ``shareDistribution`` entry Osprey added to ``policy_arn`` for ``job``."""

    policy_arn: str
    share: str
    job: JobKey

    @property
    def key(self) -> dict[str, dict[str, str]]:
        return {"pk": {"S": SHARES_PK}, "sk": {"S": share_sk(self.policy_arn, self.share)}}


class ShareLedger(RegistryTable):
    """The share entries Osprey added, in one registry table. ``client=None`` creates a DynamoDB client on first
    use. With a ``fence`` (the apply step's lease token, set per invocation), every write is a transaction that
    checks it: :class:`~osprey_control.registry.fence.FenceLostError` and nothing written once another execution
    holds the lease."""

    fence: Fence | None = None

    def _write(self, item: dict[str, Any]) -> None:
        if self.fence is not None:
            fenced_transaction(self.client, [item], self.fence)
        elif "Put" in item:
            self.client.put_item(**item["Put"])
        else:
            self.client.delete_item(**item["Delete"])

    def _pages(self) -> Iterator[dict[str, Any]]:
        return self.query_items(
            KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": SHARES_PK}}
        )

    def entries(self) -> list[ShareEntry]:
        """Every entry Osprey added and has not removed yet (one Query; a page holds thousands)."""
        return [
            ShareEntry(item["policy"]["S"], item["share"]["S"], JobKey.parse(item["job"]["S"]))
            for item in self._pages()
        ]

    def add(self, entries: Iterable[ShareEntry]) -> None:
        """Record entries Osprey just added to their policies (a new entry is one PutItem; there are few)."""
        for entry in entries:
            item = {
                **entry.key,
                "policy": {"S": entry.policy_arn},
                "share": {"S": entry.share},
                "job": {"S": str(entry.job)},
            }
            self._write({"Put": {"TableName": self.table_name, "Item": item}})

    def remove(self, entries: Iterable[ShareEntry]) -> None:
        """Forget entries that were taken out of their policies."""
        for entry in entries:
            self._write({"Delete": {"TableName": self.table_name, "Key": entry.key}})

    def finished(self, entries: Iterable[ShareEntry]) -> list[ShareEntry]:
        """The entries whose job has ended or is no longer in the registry (BatchGetItem, 100 jobs a call). A job
        DynamoDB left unread counts as active: it is looked at again next cycle."""
        pending = list(entries)
        read = batch_get(
            self.client,
            self.table_name,
            [{"pk": {"S": job_pk(entry.job)}, "sk": {"S": META}} for entry in pending],
        )
        unread = {key["pk"]["S"] for key in read.unread}
        done: list[ShareEntry] = []
        for entry in pending:
            pk = job_pk(entry.job)
            if pk in unread:
                continue
            item = read.items.get((pk, META))
            if item is None or JobStatus(item["status"]["S"]) not in ACTIVE_STATUSES:
                done.append(entry)
        return done
