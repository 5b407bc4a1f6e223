"""Instance items in the registry table: which jobs run on an EC2 instance (``pk = INSTANCE#<id>``,
``sk = JOB#<backend>#<id>``) and the instance's spot risk (``pk = RISK#<id>``, ``sk = RISK``: its own type, which
only ingest writes). Ingest links a job's instances when
it sees them and records a spot warning on the instance, so a job that arrives after the warning still gets the
risk and a warning that arrives after the job finds it. Both expire with the history retention.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from osprey_control.errors import condition_failed
from osprey_control.registry.items import format_time, from_attribute, to_attribute
from osprey_control.registry.keys import JOB_PREFIX, instance_pk, job_pk, key_from_pk, risk_key
from osprey_control.registry.model import JobKey
from osprey_control.registry.table import TTL_ATTRIBUTE, RegistryTable

__all__: list[str] = []


class InstanceItems(RegistryTable):
    """Instance links and spot risk of one registry table. ``client=None`` creates a DynamoDB client on first use."""

    def link(self, key: JobKey, instance_ids: Iterable[str], *, expires: int) -> None:
        """Note that ``key`` runs on each of ``instance_ids``."""
        for instance_id in sorted(instance_ids):
            self.client.put_item(
                TableName=self.table_name,
                Item={
                    "pk": {"S": instance_pk(instance_id)},
                    "sk": {"S": job_pk(key)},
                    TTL_ATTRIBUTE: {"N": str(expires)},
                },
            )

    def jobs_on(self, instance_id: str) -> list[JobKey]:
        """The jobs linked to ``instance_id`` (consistent, paginated)."""
        items = self.query_items(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :job)",
            ExpressionAttributeValues={":pk": {"S": instance_pk(instance_id)}, ":job": {"S": JOB_PREFIX}},
            ConsistentRead=True,
        )
        return [key_from_pk(item["sk"]["S"]) for item in items]

    def risk(self, instance_ids: Iterable[str]) -> dict[str, float]:
        """The recorded spot risk of each of ``instance_ids`` that has one."""
        found: dict[str, float] = {}
        for instance_id in sorted(instance_ids):
            item = self.client.get_item(
                TableName=self.table_name,
                Key=risk_key(instance_id),
                ConsistentRead=True,
            ).get("Item")
            if item:
                found[instance_id] = float(from_attribute(item["risk"]))
        return found

    def record_risk(self, instance_id: str, risk: float, event_time: datetime, *, expires: int) -> None:
        """Store ``risk`` for the instance if it is higher than the stored one (of equal risks the earliest
        warning is kept, so replays converge on one item)."""
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=risk_key(instance_id),
                UpdateExpression="SET risk = :risk, risk_time = :time, #ttl = :ttl",
                ConditionExpression="attribute_not_exists(risk) OR risk < :risk OR (risk = :risk AND risk_time > :time)",
                ExpressionAttributeNames={"#ttl": TTL_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":risk": to_attribute(float(risk)),
                    ":time": {"S": format_time(event_time)},
                    ":ttl": {"N": str(expires)},
                },
            )
        except Exception as error:
            if not condition_failed(error):
                raise
