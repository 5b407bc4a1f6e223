"""Coordinating a cycle: the lease that keeps two cycles from overlapping, the shard plan for the Map, and the
deadline that stops a step before its Lambda times out."""

from osprey_control.coordination.deadline import Deadline
from osprey_control.coordination.lease import LEASE_PK, CycleLease, LeaseState
from osprey_control.coordination.shards import ShardPlan, plan_shards

__all__ = ["LEASE_PK", "CycleLease", "Deadline", "LeaseState", "ShardPlan", "plan_shards"]
