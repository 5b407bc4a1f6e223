"""A job's allocation history: when it held its GPUs, over all attempts (the ``attained_service`` signal).

Pure Python, no AWS import. Every job event adds one *mark*: at the time the job entered the event's status,
either "running with N GPUs" or "not running" (pending, starting, requeued, finished). The intervals are a
function of the set of marks: sorted by time, a running mark opens an interval (or splits it when the GPU
count changes), a not-running mark closes it. Because the stored value is a *set*, merging is a join: any
order and any number of deliveries of the same events give the same history, and a late event that falls
between two others is placed where it happened, not where it arrived. This is why marks are kept rather than
intervals: a "stopped" event delivered after the "running again" one that followed it would otherwise be lost.

Only RUNNING holds GPUs here. STARTING (instances provisioning, images downloading) does not count: it is
short on Batch and EKS, and on SageMaker it is time the user is not yet training.

Bounded: at most :data:`MAX_MARKS` marks are kept. Beyond that the oldest *closed* intervals are folded into
``folded_seconds`` / ``folded_gpu_seconds`` and ``folded_until`` moves to the end of the last one folded;
marks at or before ``folded_until`` are ignored from then on (an event that late can no longer be placed).
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__: list[str] = []

MAX_MARKS = 64  # ~30 attempts of transitions; each mark is ~30 bytes in the item, so ~2 KB at most


class AllocationMark(BaseModel):
    """The job entered a running (``gpus`` > 0, or None when unknown) or a not-running state at ``at``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    at: datetime
    running: bool
    gpus: int | None = Field(default=None, ge=1)

    @field_validator("at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    @property
    def order(self) -> tuple[datetime, bool]:
        # At one instant a stop sorts before a start, so "stopped and restarted at t" opens a new interval.
        return (self.at, self.running)


class AllocationSpan(BaseModel):
    """One interval: ``gpus`` GPUs (None: unknown) from ``start`` to ``end`` (None: still held)."""

    model_config = ConfigDict(frozen=True)

    start: datetime
    end: datetime | None
    gpus: int | None


class Allocations(BaseModel):
    """The marks since ``folded_until`` plus the sums of everything before it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    marks: tuple[AllocationMark, ...] = ()
    folded_seconds: float = Field(default=0.0, ge=0)
    folded_gpu_seconds: float = Field(default=0.0, ge=0)
    # A folded interval whose GPU count was unknown: its GPU-seconds are missing from the sum, which is
    # then a lower bound only, so attained_service is reported as unknown rather than too small.
    folded_gpus_unknown: bool = False
    folded_until: datetime | None = None

    @property
    def empty(self) -> bool:
        return not self.marks and self.folded_until is None

    def spans(self) -> tuple[AllocationSpan, ...]:
        """The intervals the marks describe, oldest first (at most one open, the last)."""
        spans: list[AllocationSpan] = []
        start: datetime | None = None
        gpus: int | None = None
        for mark in self.marks:
            if not mark.running:
                if start is not None:
                    spans.append(AllocationSpan(start=start, end=mark.at, gpus=gpus))
                start, gpus = None, None
            elif start is None:
                start, gpus = mark.at, mark.gpus
            elif gpus is None:
                gpus = mark.gpus  # the count became known: it was the same allocation all along
            elif mark.gpus is not None and mark.gpus != gpus:
                # Resized while running (an elastic job): a new interval at the new size.
                spans.append(AllocationSpan(start=start, end=mark.at, gpus=gpus))
                start, gpus = mark.at, mark.gpus
        if start is not None:
            spans.append(AllocationSpan(start=start, end=None, gpus=gpus))
        return tuple(spans)

    def with_mark(self, mark: AllocationMark) -> Allocations:
        """This history with ``mark`` added (unchanged when it is already known or older than the fold)."""
        if self.folded_until is not None and mark.at <= self.folded_until:
            return self
        by_order = {existing.order: existing for existing in self.marks}
        seen = by_order.get(mark.order)
        if seen is not None:
            if seen.gpus is not None and (mark.gpus is None or mark.gpus <= seen.gpus):
                return self
            # Two reports of the same transition: the larger GPU count (a join, whatever the order).
            mark = mark.model_copy(update={"gpus": max(seen.gpus or 0, mark.gpus or 0) or None})
        by_order[mark.order] = mark
        marks = tuple(by_order[order] for order in sorted(by_order))
        return self.model_copy(update={"marks": marks})._folded()

    def _folded(self) -> Allocations:
        result = self
        while len(result.marks) > MAX_MARKS:
            spans = result.spans()
            if not spans:
                # Only not-running marks: none of them opens anything, the newest ones suffice.
                return result.model_copy(update={"marks": result.marks[-MAX_MARKS:]})
            if spans[0].end is None:
                # One open interval holding more marks than the cap (a pathological stream of running
                # events): keep where it started and the newest marks.
                first = next(m for m in result.marks if m.at >= spans[0].start)
                newest = tuple(m for m in result.marks[-(MAX_MARKS - 1) :] if m != first)
                return result.model_copy(update={"marks": (first, *newest)})
            oldest = spans[0]
            assert oldest.end is not None
            seconds = max(0.0, (oldest.end - oldest.start).total_seconds())
            result = result.model_copy(
                update={
                    "marks": tuple(m for m in result.marks if m.at > oldest.end),
                    "folded_seconds": result.folded_seconds + seconds,
                    "folded_gpu_seconds": result.folded_gpu_seconds + seconds * (oldest.gpus or 0),
                    "folded_gpus_unknown": result.folded_gpus_unknown or oldest.gpus is None,
                    "folded_until": oldest.end,
                }
            )
        return result
