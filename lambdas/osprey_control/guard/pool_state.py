"""What the lookahead (:mod:`osprey_control.guard.forward`) keeps of a pool between two events: the free GPUs of
each node and the queue in its backend's order.

Both are kept up to date as jobs come and go rather than rebuilt at every event: the lookahead runs a pass at
each of up to 256 predicted events, for every candidate order and sampled run-time error, and at 10,000 jobs a
pool rebuilt (sorted, regrouped) per pass was the guard's cost (docs/performance.md). Pure arithmetic.
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Generic, TypeVar

__all__ = ["Nodes", "NodesTrial", "OrderKey", "RunQueue", "VictimOrder"]

_Item = TypeVar("_Item")
# A job's place in an order: (-priority, submitted, index) in the queue, (priority, -started, -index) among
# Kueue's victims; unique by the index.
OrderKey = tuple[float, float, int]


class Nodes:
    """Free GPUs per node, placed as the simulated cluster places (best fit, lowest index on ties; a gang takes
    the lowest-numbered whole free nodes). Nodes are bucketed by free GPUs, so a fit is O(node size)."""

    def __init__(self, capacity: int, node_gpus: int) -> None:
        self.size = max(1, min(node_gpus, capacity))
        count, rest = divmod(capacity, self.size)
        self.free = [self.size] * count + ([rest] if rest else [])
        self.total_free = capacity
        self.by_free: list[set[int]] = [set() for _ in range(self.size + 1)]
        for index, free in enumerate(self.free):
            self.by_free[free].add(index)

    def fits(self, gpus: int) -> bool:
        if gpus > self.total_free:
            return False
        if gpus > self.size:
            return len(self.by_free[self.size]) >= math.ceil(gpus / self.size)
        return any(self.by_free[k] for k in range(gpus, self.size + 1))

    def place(self, gpus: int) -> list[tuple[int, int]] | None:
        if not self.fits(gpus):
            return None
        if gpus > self.size:
            need = math.ceil(gpus / self.size)
            return self.take([(index, self.size) for index in sorted(self.by_free[self.size])[:need]])
        bucket = next(self.by_free[k] for k in range(gpus, self.size + 1) if self.by_free[k])
        return self.take([(min(bucket), gpus)])

    def trial(self) -> NodesTrial:
        """A what-if of releasing and taking GPUs back, for a job that :meth:`place` just refused."""
        return NodesTrial(self)

    def force(self, gpus: int) -> list[tuple[int, int]]:
        """A running job the lookahead found already placed: where it fits, else from any free GPUs."""
        placed = self.place(gpus)
        if placed is not None:
            return placed
        taken: list[tuple[int, int]] = []
        for index, free in enumerate(self.free):
            if gpus <= 0:
                break
            part = min(free, gpus)
            if part:
                taken.append((index, part))
                gpus -= part
        return self.take(taken)

    def take(self, parts: list[tuple[int, int]]) -> list[tuple[int, int]]:
        for index, gpus in parts:
            self._move(index, -gpus)
        return parts

    def release(self, parts: list[tuple[int, int]]) -> None:
        for index, gpus in parts:
            self._move(index, gpus)

    def _move(self, index: int, delta: int) -> None:
        free = self.free[index]
        self.by_free[free].discard(index)
        self.free[index] = free + delta
        self.by_free[free + delta].add(index)
        self.total_free += delta


class NodesTrial:
    """Nodes as they would be after releasing (and taking back) some running jobs' GPUs, without copying them.

    It is made for a job that did not fit the nodes as they are, so a node no job released GPUs on cannot hold
    it either: only the touched nodes are kept (their free GPUs, and how many have each count), and a fit is
    O(node size) however many nodes the pool has.
    """

    __slots__ = ("_count", "_free", "_nodes", "total_free")

    def __init__(self, nodes: Nodes) -> None:
        self._nodes = nodes
        self._free: dict[int, int] = {}
        self._count = [0] * (nodes.size + 1)
        self.total_free = nodes.total_free

    def release(self, parts: list[tuple[int, int]]) -> None:
        for index, gpus in parts:
            self._move(index, gpus)

    def take(self, parts: list[tuple[int, int]]) -> None:
        for index, gpus in parts:
            self._move(index, -gpus)

    def release_fits(self, parts: list[tuple[int, int]], gpus: int) -> bool:
        """:meth:`release`, then whether a job of ``gpus`` fits, for a trial that has only released so far: no
        node it did not just touch has changed, so for a job of one node only those are looked at."""
        self.release(parts)
        size = self._nodes.size
        if gpus > size:
            return self.fits(gpus)
        return self.total_free >= gpus and any(self._free[index] >= gpus for index, _ in parts)

    def fits(self, gpus: int) -> bool:
        size = self._nodes.size
        if gpus > self.total_free:
            return False
        if gpus > size:
            # A node that held a running job's GPUs was not whole before: the whole ones are the untouched
            # whole ones plus the touched nodes freed entirely.
            return len(self._nodes.by_free[size]) + self._count[size] >= math.ceil(gpus / size)
        return any(self._count[k] for k in range(gpus, size + 1))

    def _move(self, index: int, delta: int) -> None:
        free = self._free.get(index)
        if free is None:
            free = self._nodes.free[index]
        else:
            self._count[free] -= 1
        self._free[index] = free + delta
        self._count[free + delta] += 1
        self.total_free += delta


class RunQueue(Generic[_Item]):
    """Jobs sorted by their :data:`OrderKey` as they are added and removed: a pass reads them in order (a copy
    of a list) instead of sorting the whole queue again."""

    __slots__ = ("_items", "_keys")

    def __init__(self) -> None:
        self._keys: list[OrderKey] = []
        self._items: list[_Item] = []

    def add(self, key: OrderKey, item: _Item) -> int:
        """Add ``item`` at ``key``'s place; returns that place."""
        at = bisect.bisect_left(self._keys, key)
        self._keys.insert(at, key)
        self._items.insert(at, item)
        return at

    def remove(self, key: OrderKey) -> int:
        """Remove the item at ``key``; returns the place it had."""
        at = bisect.bisect_left(self._keys, key)
        if at == len(self._keys) or self._keys[at] != key:
            raise KeyError(key)
        del self._keys[at]
        del self._items[at]
        return at

    def first(self) -> _Item:
        return self._items[0]

    def in_order(self) -> list[_Item]:
        return list(self._items)

    def __len__(self) -> int:
        return len(self._keys)


class VictimOrder(Generic[_Item]):
    """Running jobs in Kueue's victim order (key: priority, then the most recently admitted first), with their
    priorities and GPUs beside them, so a pass takes its snapshot with list copies and one running sum."""

    __slots__ = ("_gpus", "_priorities", "_queue")

    def __init__(self) -> None:
        self._queue: RunQueue[_Item] = RunQueue()
        self._priorities: list[float] = []
        self._gpus: list[int] = []

    def add(self, key: OrderKey, item: _Item, gpus: int) -> None:
        at = self._queue.add(key, item)
        self._priorities.insert(at, key[0])
        self._gpus.insert(at, gpus)

    def remove(self, key: OrderKey) -> None:
        at = self._queue.remove(key)
        del self._priorities[at]
        del self._gpus[at]

    def snapshot(self) -> tuple[list[float], list[int], list[_Item]]:
        """The priorities in victim order, the GPUs of each prefix (``[0, first, first + second, ...]``) and the
        jobs."""
        return (
            list(self._priorities),
            list(itertools.accumulate(self._gpus, initial=0)),
            self._queue.in_order(),
        )
