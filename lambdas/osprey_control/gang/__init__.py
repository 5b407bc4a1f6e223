"""Gang co-scheduling (docs/design.md §7): settings, the pure watch decision, per-backend readiness and fallbacks.

``decision`` and ``settings`` are pure Python; ``readiness``, ``backends``, ``kubernetes`` (import it
from ``osprey_control.gang.kubernetes``: it needs the EKS client) and ``store`` take their clients. ``watch_step`` composes them for the gang watch Lambda. See docs/gangs.md.
"""

from osprey_control.gang.backends import (
    BatchGang,
    GangBackend,
    NotOptedInError,
    SageMakerGang,
    SageMakerQueuedGang,
)
from osprey_control.gang.decision import Action, GangPhase, GangState, Readiness, Step, decide, start
from osprey_control.gang.registration import GangRegistrar, register_gang
from osprey_control.gang.request import WatchRequest, backend_for, watch_input
from osprey_control.gang.settings import (
    GangSettings,
    poll_interval_seconds,
    requeue_delay_seconds,
    resolve_settings,
)
from osprey_control.gang.starter import start_watch
from osprey_control.gang.store import GangStore, StaleGangStateError
from osprey_control.gang.watch import WatchResult, execution_name, gang_metrics, watch_step

__all__ = [
    "Action",
    "BatchGang",
    "GangBackend",
    "GangPhase",
    "GangRegistrar",
    "GangSettings",
    "GangState",
    "GangStore",
    "NotOptedInError",
    "Readiness",
    "SageMakerGang",
    "SageMakerQueuedGang",
    "StaleGangStateError",
    "Step",
    "WatchRequest",
    "WatchResult",
    "backend_for",
    "decide",
    "execution_name",
    "gang_metrics",
    "poll_interval_seconds",
    "register_gang",
    "requeue_delay_seconds",
    "resolve_settings",
    "start",
    "start_watch",
    "watch_input",
    "watch_step",
]
