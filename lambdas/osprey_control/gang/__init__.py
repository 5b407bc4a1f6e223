"""Gang co-scheduling (DESIGN §7): settings, the pure watch decision, per-backend readiness and fallbacks.

``decide`` and ``settings`` are pure Python; ``readiness``, ``backends``, ``kubernetes`` and ``store`` take
their clients. ``watch_step`` composes them for the gang watch Lambda. See docs/gangs.md.
"""

from osprey_control.gang.backends import (
    BatchGang,
    GangBackend,
    NotOptedInError,
    SageMakerGang,
    SageMakerQueuedGang,
)
from osprey_control.gang.decide import Action, GangPhase, GangState, Readiness, Step, decide, start
from osprey_control.gang.kubernetes import KubernetesGang, kueue_gang_annotations
from osprey_control.gang.settings import (
    GangSettings,
    poll_interval_seconds,
    requeue_delay_seconds,
    resolve_settings,
)
from osprey_control.gang.store import GangStore, StaleGangStateError
from osprey_control.gang.watch import WatchResult, execution_name, gang_metrics, watch_step

__all__ = [
    "Action",
    "BatchGang",
    "GangBackend",
    "GangPhase",
    "GangSettings",
    "GangState",
    "GangStore",
    "KubernetesGang",
    "NotOptedInError",
    "Readiness",
    "SageMakerGang",
    "SageMakerQueuedGang",
    "StaleGangStateError",
    "Step",
    "WatchResult",
    "decide",
    "execution_name",
    "gang_metrics",
    "kueue_gang_annotations",
    "poll_interval_seconds",
    "requeue_delay_seconds",
    "resolve_settings",
    "start",
    "watch_step",
]
