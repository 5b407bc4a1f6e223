"""Plan requests and plan records in the registry table: the DynamoDB requests the planner, the plan step and
the in-job SDK make, in one place.

Items (:mod:`osprey_control.registry.keys`): a job's plan request ``pk = JOB#<backend>#<id>, sk = PLANREQ``
(written by the job, :func:`osprey.planning.request_planning`; its step and plan updated by the job; its
``planned_at`` by the plan step) and its plan record ``sk = PLAN`` (written by the plan step on a switch, read by
the job). What the items hold is the planner's business (:mod:`osprey_control.planner.request`,
:mod:`osprey_control.planner.record`); this module only moves them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from osprey_control.errors import condition_failed
from osprey_control.registry.batch import batch_get
from osprey_control.registry.fence import Fence, fenced_transaction
from osprey_control.registry.keys import PLAN_REQUEST_SK, PLAN_SK
from osprey_control.registry.table import RegistryTable

__all__ = ["PlanItems", "ProgressUpdate"]

# The request attributes the job's progress report writes, through placeholders: ``current`` and ``step`` are
# DynamoDB reserved words.
_PROGRESS_NAMES = {
    "#step": "step",
    "#updated": "updated_at",
    "#since": "since_step",
    "#key": "current_key",
    "#current": "current",
    "#order": "current_stage_nodes",
    "#speeds": "node_speeds",
}


def _key(pk: str, sk: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


@dataclass(frozen=True, slots=True)
class ProgressUpdate:
    """Where a job is: its step, when it said so, and the plan it runs (its key and JSON), if it says, with
    the node order it runs that plan in (JSON of ``stage_nodes``; None: rank order), and each node's speed
    as it measured it (a JSON list; None removes an earlier report, so the item never holds stale speeds)."""

    step: int
    stamp: str
    plan_key: str | None = None
    plan_json: str | None = None
    stage_nodes_json: str | None = None
    node_speeds_json: str | None = None


class PlanItems(RegistryTable):
    """Plan requests and records of one registry table. ``client=None`` creates a DynamoDB client on first use
    (pass one: a job's worker thread needs a client of its own session). With a ``fence`` (the plan step's lease
    token), the plan step's writes (:meth:`mark_planned`, :meth:`put_record`, :meth:`replace_record`) are
    transactions that check it: :class:`~osprey_control.registry.fence.FenceLostError`, nothing written, once
    another execution holds the lease. The job's own writes (requests, progress) are never fenced."""

    fence: Fence | None = None

    def _conditional(self, kind: str, request: dict[str, Any]) -> bool:
        """One conditional ``Put`` or ``Update`` (fenced when there is a fence); False if its condition failed."""
        if self.fence is not None:
            item = {kind: {"TableName": self.table_name, **request}}
            return fenced_transaction(self.client, [item], self.fence) is None
        call = self.client.put_item if kind == "Put" else self.client.update_item
        try:
            call(TableName=self.table_name, **request)
        except Exception as error:
            if condition_failed(error):
                return False
            raise
        return True

    def requests(self, pks: Sequence[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """The request item of each job partition in ``pks`` that has one (consistent reads, 100 keys a call),
        and the partitions DynamoDB left unread after its retries."""
        read = batch_get(
            self.client, self.table_name, [_key(pk, PLAN_REQUEST_SK) for pk in pks], consistent=True
        )
        items = {pk: item for (pk, _sk), item in read.items.items()}
        return items, [key["pk"]["S"] for key in read.unread]

    def put_request(self, item: dict[str, Any]) -> None:
        """Write (or replace) a plan request item."""
        self.client.put_item(TableName=self.table_name, Item=item)

    def mark_planned(
        self, pk: str, planned_at: str, reason: str, measured: dict[str, Any] | None = None
    ) -> bool:
        """Note on the request when the job was planned and why, and (``measured``, an attribute value) the
        job's measured plans; False if the request was withdrawn meanwhile."""
        expression = "SET planned_at = :now, plan_reason = :reason"
        values: dict[str, Any] = {":now": {"S": planned_at}, ":reason": {"S": reason}}
        if measured is not None:
            # Written whole: only the plan step writes it, and one plan step runs at a time (the cycle's lease).
            expression += ", measured = :measured"
            values[":measured"] = measured
        return self._conditional(
            "Update",
            {
                "Key": _key(pk, PLAN_REQUEST_SK),
                "UpdateExpression": expression,
                "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeValues": values,
            },
        )

    def update_progress(self, pk: str, update: ProgressUpdate) -> str:
        """Record the job's step (and the plan it runs) on its request: ``updated``, ``adopted`` (the plan
        changed, so ``since_step`` is now the step) or ``no-request``. Conditional writes only."""
        values: dict[str, Any] = {":step": {"N": str(update.step)}, ":now": {"S": update.stamp}}
        sets, removes = ["#step = :step", "#updated = :now"], []
        if update.node_speeds_json is None:
            removes.append("#speeds")
        else:
            sets.append("#speeds = :speeds")
            values[":speeds"] = {"S": update.node_speeds_json}

        def expression(extra_sets: list[str], extra_removes: list[str]) -> str:
            text = "SET " + ", ".join([*sets, *extra_sets])
            gone = [*removes, *extra_removes]
            return text + (" REMOVE " + ", ".join(gone) if gone else "")

        attempts: list[tuple[str, str, dict[str, Any], str]] = []
        if update.plan_key is None or update.plan_json is None:
            attempts.append((expression([], []), "attribute_exists(pk)", values, "updated"))
        else:
            same = {**values, ":key": {"S": update.plan_key}}
            attempts.append((expression([], []), "attribute_exists(pk) AND #key = :key", same, "updated"))
            adopt_sets = ["#since = :step", "#key = :key", "#current = :current"]
            adopt_values = {**same, ":current": {"S": update.plan_json}}
            if update.stage_nodes_json is None:
                adopt = expression(adopt_sets, ["#order"])
            else:
                adopt = expression([*adopt_sets, "#order = :order"], [])
                adopt_values[":order"] = {"S": update.stage_nodes_json}
            attempts.append((adopt, "attribute_exists(pk)", adopt_values, "adopted"))
        for update_expression, condition, attribute_values, outcome in attempts:
            try:
                self.client.update_item(
                    TableName=self.table_name,
                    Key=_key(pk, PLAN_REQUEST_SK),
                    UpdateExpression=update_expression,
                    ConditionExpression=condition,
                    ExpressionAttributeNames={
                        name: attribute
                        for name, attribute in _PROGRESS_NAMES.items()
                        if name in update_expression + condition
                    },
                    ExpressionAttributeValues=attribute_values,
                )
            except Exception as error:
                if condition_failed(error):
                    continue
                raise
            return outcome
        return "no-request"

    def record(self, pk: str) -> dict[str, Any] | None:
        """The job's plan record item, if the plan step wrote one."""
        item: dict[str, Any] | None = self.client.get_item(
            TableName=self.table_name, Key=_key(pk, PLAN_SK)
        ).get("Item")
        return item

    def replace_record(self, item: dict[str, Any], stale_plan_id: str) -> bool:
        """Overwrite the job's record only if it still holds ``stale_plan_id`` (a withdrawal must not undo a
        recommendation written meanwhile); False if it no longer does."""
        return self._conditional(
            "Put",
            {
                "Item": item,
                "ConditionExpression": "plan_id = :stale",
                "ExpressionAttributeValues": {":stale": {"S": stale_plan_id}},
            },
        )

    def put_record(self, item: dict[str, Any]) -> bool:
        """Write a plan record unless that very plan (``plan_id``) is already the job's record: the same
        recommendation is never rewritten, so its ``created_at`` stays when it was first made. False if it was."""
        return self._conditional(
            "Put",
            {
                "Item": item,
                "ConditionExpression": "attribute_not_exists(pk) OR plan_id <> :plan_id",
                "ExpressionAttributeValues": {":plan_id": item["plan_id"]},
            },
        )
