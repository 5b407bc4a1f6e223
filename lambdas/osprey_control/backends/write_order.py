"""The order a cycle's priority writes land in, so that no moment between two cycles preempts a job that neither
the old priorities nor the new ones would (docs/decisions.md, "Inversion-safe write order").

A backend that preempts by priority (Kueue's ``LowerPriority``) acts on each write as it lands: the apply step
PATCHes one Workload at a time, and a queued job raised before the running job it now ranks below is lifted can
preempt that job in between, though the cycle's final priorities would not (bench/kueue_bench.py measures it on
a real Kueue). A cycle that changes many priorities at once (the guard switching between the native order and
the policy's) would then pay a wave of checkpoint losses for an order that, once written, preempts nothing.

Writes are made in four phases: jobs that hold GPUs raised first, then queued jobs lowered, then queued jobs
raised, then jobs that hold GPUs lowered. After the first two phases every queued job sits at the lower of its
old and new priority and every running job at the higher of its two, so a queued job outranks a running one
only where it did both before and after; after the third, only where it does after. Each intermediate state
preempts nothing the final one would not. Backends that do not preempt by priority lose nothing by the order.

A job Osprey has not written yet holds its native value (on Kueue its WorkloadPriorityClass value, which can sit
above everything Osprey writes): its first write is a raise or a lowering from *that* (``held``), not always a
raise. Counted as a raise, a just-admitted job of a high class lowered into the policy's band would land first,
under queued jobs that then preempt it within the same cycle.
"""

from __future__ import annotations

__all__ = ["write_phase"]


def write_phase(*, holds_gpus: bool, applied: int | None, priority: int, held: float | None = None) -> int:
    """The phase (0..3, lowest written first) of a write of ``priority`` over ``applied``; where nothing was
    applied yet, over ``held``, the native value the job holds in Osprey's terms (None: unknown, the write counts
    as a raise)."""
    current = applied if applied is not None else held
    raised = current is None or priority > current
    if holds_gpus:
        return 0 if raised else 3
    return 2 if raised else 1
