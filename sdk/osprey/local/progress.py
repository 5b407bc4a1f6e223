"""Progress lines for ``osprey local up``: each step prefixed with the time since the start, and a line every
``quiet`` seconds while a step is silent, so a one-to-two-minute ``cdk deploy`` never looks hung.

``[0:05] npx cdk deploy Osprey ...`` then ``[0:20] ... still at npx cdk deploy Osprey (15 s)``. The lines go
through ``echo`` (stdout of the foreground ``up``, the log file that ``up --detach`` tails).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

__all__ = ["Progress", "clock"]


def clock(seconds: float) -> str:
    """``0:05``, ``1:42``, ``12:03``: minutes and seconds since the start."""
    whole = max(0, int(seconds))
    return f"{whole // 60}:{whole % 60:02d}"


class Progress:
    """Call it with a step's description; use it as a context manager for the heartbeat thread."""

    def __init__(
        self,
        echo: Callable[[str], None] = print,
        quiet: float = 15.0,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._echo = echo
        self._quiet = quiet
        self._now = now
        self.started = now()
        self._step = "starting"
        self._step_at = self.started
        self._said_at = self.started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def elapsed(self) -> float:
        return self._now() - self.started

    def __call__(self, message: str) -> None:
        """Say ``message`` as the current step."""
        with self._lock:
            now = self._now()
            self._step, self._step_at, self._said_at = message.rstrip(". "), now, now
            self._echo(f"[{clock(now - self.started)}] {message}")

    def beat(self) -> bool:
        """Say that the current step is still running if nothing was said for ``quiet`` seconds."""
        with self._lock:
            now = self._now()
            if now - self._said_at < self._quiet:
                return False
            self._said_at = now
            self._echo(
                f"[{clock(now - self.started)}] ... still at {self._step} ({now - self._step_at:.0f} s)"
            )
            return True

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.beat()

    def __enter__(self) -> Progress:
        self._thread = threading.Thread(target=self._run, name="osprey-local-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
