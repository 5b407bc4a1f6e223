"""The cluster: free GPUs per node, best-fit placement of single-node workers and whole-node gangs."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SimulatedCluster"]

# (node index, GPUs taken on it)
Allocation = list[tuple[int, int]]


class SimulatedCluster:
    """Nodes x GPUs. Nodes are bucketed by free GPUs so "does it fit" is O(node size), not O(nodes).

    A job of at most one node's GPUs goes best-fit (the node with the fewest free GPUs that still fit, lowest
    index on ties) to keep whole nodes free for gangs; a gang takes whole free nodes of the largest size,
    lowest indexes first. Every choice is deterministic.
    """

    def __init__(self, node_gpus: Sequence[int]) -> None:
        self.capacity: tuple[int, ...] = tuple(node_gpus)
        self.node_size = max(self.capacity)
        self.total = sum(self.capacity)
        self.free_total = self.total
        self._free = list(self.capacity)
        self._by_free: list[set[int]] = [set() for _ in range(self.node_size + 1)]
        for node, gpus in enumerate(self.capacity):
            self._by_free[gpus].add(node)

    def free_on(self, node: int) -> int:
        return self._free[node]

    def fits(self, gpus: int) -> bool:
        if gpus > self.free_total:
            return False
        if gpus > self.node_size:
            return len(self._by_free[self.node_size]) >= gpus // self.node_size
        return any(self._by_free[k] for k in range(gpus, self.node_size + 1))

    def place(self, gpus: int) -> Allocation | None:
        """Take ``gpus`` (one node's worth at most, or whole nodes), or None when it does not fit now."""
        if not self.fits(gpus):
            return None
        if gpus > self.node_size:
            nodes = sorted(self._by_free[self.node_size])[: gpus // self.node_size]
            allocation = [(node, self.node_size) for node in nodes]
        else:
            bucket = next(self._by_free[k] for k in range(gpus, self.node_size + 1) if self._by_free[k])
            allocation = [(min(bucket), gpus)]
        self.take(allocation)
        return allocation

    def take(self, allocation: Allocation) -> None:
        for node, gpus in allocation:
            free = self._free[node]
            if gpus > free:
                raise ValueError(f"node {node} has {free} free GPUs, cannot take {gpus}")
            self._by_free[free].discard(node)
            self._free[node] = free - gpus
            self._by_free[free - gpus].add(node)
            self.free_total -= gpus

    def release(self, allocation: Allocation) -> None:
        for node, gpus in allocation:
            free = self._free[node]
            if free + gpus > self.capacity[node]:
                raise ValueError(f"node {node} would have more free GPUs than it has")
            self._by_free[free].discard(node)
            self._free[node] = free + gpus
            self._by_free[free + gpus].add(node)
            self.free_total += gpus
