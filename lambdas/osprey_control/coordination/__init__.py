"""Coordinating a cycle: the lease that keeps two cycles from overlapping, and the shard plan for the Map."""

from osprey_control.coordination.lease import LEASE_PK, CycleLease, LeaseState
from osprey_control.coordination.shards import ShardPlan, plan_shards

__all__ = ["LEASE_PK", "CycleLease", "LeaseState", "ShardPlan", "plan_shards"]
