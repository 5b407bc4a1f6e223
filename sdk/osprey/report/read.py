"""Reading a whole registry for ``osprey report``: one paginated Scan, not a Query per job.

A report covers finished jobs too, and the ``active-jobs`` index holds only active ones, so the job items are
read with a Scan, filtered to the item types the report uses (jobs, decisions, apply outcomes, gang states); the
same pass brings the history items, which a Query per job would otherwise fetch (three round trips per job). A
Scan reads (and bills) the whole table once: about 1 read unit per 4 KB, so a registry of 10,000 jobs with two
weeks of history costs a few thousand read units per report, a fraction of a cent on demand.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from osprey.report.model import JobTrail, Snapshot
from osprey_control.registry import (
    APPLY_PREFIX,
    DECISION_PREFIX,
    GANG_PREFIX,
    JOB_PREFIX,
    JobKey,
    from_attribute,
    is_job_pk,
    item_to_record,
    key_from_pk,
)

if TYPE_CHECKING:
    from osprey_control.registry import JobRegistry

__all__ = ["read_snapshot"]

_PREFIXES = {":job": JOB_PREFIX, ":decision": DECISION_PREFIX, ":apply": APPLY_PREFIX, ":gang": GANG_PREFIX}


def _values(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: from_attribute(value) for name, value in item.items()}


def read_snapshot(registry: JobRegistry, now: datetime) -> Snapshot:
    """Every job of ``registry`` with its decisions, apply outcomes and gang state (history oldest first)."""
    paginator = registry.client.get_paginator("scan")
    pages = paginator.paginate(
        TableName=registry.table_name,
        FilterExpression=" OR ".join(f"begins_with(pk, {name})" for name in _PREFIXES),
        ExpressionAttributeValues={name: {"S": prefix} for name, prefix in _PREFIXES.items()},
    )
    records: dict[JobKey, Any] = {}
    decisions: dict[JobKey, list[dict[str, Any]]] = defaultdict(list)
    applies: dict[JobKey, list[dict[str, Any]]] = defaultdict(list)
    gangs: dict[JobKey, dict[str, Any]] = {}
    for page in pages:
        for item in page.get("Items", []):
            pk = item["pk"]["S"]
            if is_job_pk(pk, JOB_PREFIX):
                records[key_from_pk(pk, JOB_PREFIX)] = item_to_record(item)
            elif is_job_pk(pk, DECISION_PREFIX):
                values = _values(item)
                if isinstance(values.get("decision"), str):  # stored as the job item's JSON text
                    values["decision"] = json.loads(values["decision"])
                decisions[key_from_pk(pk, DECISION_PREFIX)].append(values)
            elif is_job_pk(pk, APPLY_PREFIX):
                applies[key_from_pk(pk, APPLY_PREFIX)].append(_values(item))
            elif is_job_pk(pk, GANG_PREFIX):
                gangs[key_from_pk(pk, GANG_PREFIX)] = _values(item)
    # History items whose job item is gone (none expire before their job; a job item is never deleted) are
    # left out: without the record there is no backend, pool or allocation to put them against.
    trails = tuple(
        JobTrail(
            record=record,
            decisions=tuple(sorted(decisions.get(key, []), key=lambda item: str(item.get("sk", "")))),
            applies=tuple(sorted(applies.get(key, []), key=lambda item: str(item.get("sk", "")))),
            gang=gangs.get(key),
        )
        for key, record in sorted(records.items(), key=lambda pair: str(pair[0]))
    )
    return Snapshot(jobs=trails, read_at=now)
