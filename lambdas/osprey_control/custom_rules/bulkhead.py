"""Bulkheads for a shard's jobs: each custom rule's jobs run in their own bounded lane.

A job that calls custom rules holds one slot of each rule it calls (by function ARN) while it is derived; a job
without custom rules holds a slot of the shared lane. A job starts only when all its lanes have a free slot,
and the worker pool has a thread for every slot, so a rule whose calls hang ties up only its own slots: the
jobs of every other rule (and the jobs without custom rules) keep going. Waiting jobs hold no thread.

Before starting a job, ``may_start`` is asked (the deadline: will this job's worst case end before the
margin?); a job it refuses is not run and is reported as deferred.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

__all__ = ["run_in_lanes"]

T = TypeVar("T")
R = TypeVar("R")

SHARED_LANE = ""  # jobs without custom rules


def run_in_lanes(
    items: Sequence[T],
    lanes_of: Callable[[T], frozenset[str]],
    work: Callable[[T], R],
    *,
    slots_per_lane: int,
    shared_slots: int,
    may_start: Callable[[T], bool] = lambda _: True,
) -> tuple[dict[int, R], list[int]]:
    """Run ``work`` over ``items`` (by index) within the lanes' slots; returns the results by index and the
    indices ``may_start`` refused (in the order they were reached)."""
    if slots_per_lane < 1 or shared_slots < 1:
        raise ValueError("every lane needs at least one slot")
    queues: dict[frozenset[str], deque[int]] = {}
    for index, item in enumerate(items):
        queues.setdefault(lanes_of(item) or frozenset({SHARED_LANE}), deque()).append(index)
    lanes = {lane for key in queues for lane in key}

    def capacity(lane: str) -> int:
        return shared_slots if lane == SHARED_LANE else slots_per_lane

    threads = min(len(items), sum(capacity(lane) for lane in lanes)) or 1
    results: dict[int, R] = {}
    deferred: list[int] = []
    in_use: Counter[str] = Counter()
    running: dict[Future[R], tuple[int, frozenset[str]]] = {}
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="osprey-derive") as pool:
        while True:
            for key, queue in queues.items():
                while queue and all(in_use[lane] < capacity(lane) for lane in key):
                    index = queue.popleft()
                    if not may_start(items[index]):
                        deferred.append(index)
                        continue
                    in_use.update(key)
                    running[pool.submit(work, items[index])] = (index, key)
            if not running:  # every queue is empty: a lane with free slots never leaves a queue waiting
                return results, deferred
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                index, key = running.pop(future)
                in_use.subtract(key)
                results[index] = future.result()
