"""Coordinating a cycle: the lease that keeps two cycles from overlapping, its fence (the token that makes an
execution that lost the lease write nothing), the shard plan for the Map, and the deadline that stops a step
before its Lambda times out."""

from osprey_control.coordination.deadline import Deadline
from osprey_control.coordination.fence import Fence, FenceLostError
from osprey_control.coordination.lease import LEASE_PK, CycleLease, LeaseState
from osprey_control.coordination.shards import ShardPlan, plan_shards

__all__ = [
    "LEASE_PK",
    "CycleLease",
    "Deadline",
    "Fence",
    "FenceLostError",
    "LeaseState",
    "ShardPlan",
    "plan_shards",
]
