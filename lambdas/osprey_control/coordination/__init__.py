"""Coordinating a cycle: the deadline that stops a step before its Lambda times out.

The lease that keeps two cycles from overlapping, its fence (the token that makes an execution that lost the
lease write nothing) and the shard plan for the Map are registry items, so they live in the package that owns
the table: :mod:`osprey_control.registry.lease`, :mod:`~osprey_control.registry.fence` and
:mod:`~osprey_control.registry.shards`.
"""

from osprey_control.coordination.deadline import Deadline

__all__ = ["Deadline"]
