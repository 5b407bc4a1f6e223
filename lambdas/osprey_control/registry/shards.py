"""Which shards a cycle maps over.

One COUNT Query per shard on the sparse active-jobs index (no items read) tells which shards have jobs; empty
shards are left out so the Map starts no idle derive invocations (and the collect step reads no empty shard).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from osprey_control.aws import client_for
from osprey_control.registry.keys import ACTIVE_INDEX

__all__ = ["plan_shards"]


@dataclass(frozen=True)
class ShardPlan:
    shards: list[int]
    jobs: int
    jobs_per_shard: dict[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "shards": self.shards,
            "jobs": self.jobs,
            "jobsPerShard": {str(shard): count for shard, count in self.jobs_per_shard.items()},
        }


def _count(client: Any, table_name: str, shard: int) -> int:
    total = 0
    request: dict[str, Any] = {
        "TableName": table_name,
        "IndexName": ACTIVE_INDEX,
        "KeyConditionExpression": "active_shard = :shard",
        "ExpressionAttributeValues": {":shard": {"N": str(shard)}},
        "Select": "COUNT",
    }
    while True:
        page = client.query(**request)
        total += int(page.get("Count", 0))
        if "LastEvaluatedKey" not in page:
            return total
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def plan_shards(table_name: str, shards: int, client: Any = None) -> ShardPlan:
    """Count the active jobs of every shard; the plan lists the shards that have any."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    dynamodb = client_for("dynamodb", client)
    counts = {shard: _count(dynamodb, table_name, shard) for shard in range(shards)}
    busy = {shard: count for shard, count in counts.items() if count}
    jobs = sum(busy.values())
    return ShardPlan(sorted(busy), jobs, busy)
