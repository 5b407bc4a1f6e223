"""The benches' stand-in for the control plane's schedule: a cycle every ``interval`` seconds on a thread."""

from __future__ import annotations

import threading
import time

__all__ = ["PeriodicLoop"]


class PeriodicLoop:
    """Runs :meth:`cycle` every ``interval`` seconds from :meth:`start` until :meth:`stop`.

    A cycle that raises (a real scheduler busy or not answering on a loaded machine) is counted and the loop goes
    on at the next cycle, as production's next scheduled run does; :attr:`failures` keeps each error, so a run
    whose loop did not work is visible with its cause (:meth:`health`) instead of reading as Osprey at work.
    Subclasses implement :meth:`cycle` and count :attr:`cycles`.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.cycles = 0
        self.busy_s = 0.0  # time spent in cycles (a cycle longer than the interval delays the next)
        self.failures: list[str] = []
        self.started_at: float | None = None
        self.stopped_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def cycle(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self.started_at = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.started_at is None:
            return  # never started (the first submission failed)
        self._thread.join(timeout=30)
        self.stopped_at = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.cycle()
            except Exception as error:  # counted and reported (health()); the next cycle retries
                self.failures.append(f"{type(error).__name__}: {error}")
            self.busy_s += time.monotonic() - started
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    @property
    def mean_cycle_s(self) -> float:
        runs = self.cycles + len(self.failures)
        return self.busy_s / runs if runs else 0.0

    def health(self) -> str | None:
        """Why this loop's run does not show Osprey at work (None when it does): failed cycles, or far fewer
        cycles than the run's length allows (a cycle that hung)."""
        span = (self.stopped_at or time.monotonic()) - (self.started_at or time.monotonic())
        expected = span / self.interval
        problems = []
        if self.failures:
            problems.append(f"{len(self.failures)} cycles failed (first: {self.failures[0]})")
        if self.cycles < 0.5 * expected:
            problems.append(f"{self.cycles} cycles in {span:.0f} s where about {expected:.0f} were due")
        return "; ".join(problems) or None
