"""What a backend must do for a gang (docs/design.md §7), as the watch sees it: observe readiness, suspend and
resume (requeue), stop (fail). Each backend package implements it (``osprey_control.backends.<name>.gang``);
the watch depends only on this protocol.

``fail`` stops only jobs that opted in (tagged ``osprey:enabled=true``, labelled ``osprey.aws/enabled=true`` on
Kubernetes, marked in the Slurm comment); otherwise the backend raises :class:`NotOptedInError` and the watch
records the refusal.
"""

from __future__ import annotations

from typing import Protocol

from osprey_control.errors import PermanentError
from osprey_control.gang.decision import Readiness

__all__ = ["NOT_OPTED_IN", "STOP_REASON", "GangBackend", "NoRequeue", "NotOptedInError"]

NOT_OPTED_IN = "not-opted-in"  # NotOptedInError's reason
# What a backend that can say why it stops a job says for the ``fail`` fallback.
STOP_REASON = "Osprey: gang not ready within its timeout (fallback fail)"


class NotOptedInError(PermanentError):
    """The job did not opt in: Osprey never stops it (asking again cannot change that)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason=NOT_OPTED_IN)


class GangBackend(Protocol):
    supports_requeue: bool

    def readiness(self) -> Readiness: ...
    def suspend(self) -> None: ...
    def resume(self) -> None: ...
    def stop(self) -> None: ...


class NoRequeue:
    """For a backend that cannot return a started job to its queue: the watch applies ``requeue`` as
    ``serial`` there (``supports_requeue`` is False), so these are never called by it."""

    supports_requeue = False

    def suspend(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot requeue a started job")

    def resume(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot requeue a started job")
