"""Gang co-scheduling (docs/design.md §7): settings, the pure watch decision, the protocol every backend's gang
implements (``backend``), the watch step over it, its state (``store``) and the watch's start (``registration``).

``decision``, ``settings`` and ``backend`` are pure Python. What each backend does for a gang lives in its own
package (``osprey_control.backends.<name>.gang``), reached through ``osprey_control.backends.driver_for``. See
docs/gangs.md.
"""

from osprey_control.gang.backend import NOT_OPTED_IN, GangBackend, NoRequeue, NotOptedInError
from osprey_control.gang.decision import Action, GangPhase, GangState, Readiness, Step, decide, start
from osprey_control.gang.registration import GangRegistrar, register_gang
from osprey_control.gang.request import WatchJob, WatchRequest, watch_input
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
    "NOT_OPTED_IN",
    "Action",
    "GangBackend",
    "GangPhase",
    "GangRegistrar",
    "GangSettings",
    "GangState",
    "GangStore",
    "NoRequeue",
    "NotOptedInError",
    "Readiness",
    "StaleGangStateError",
    "Step",
    "WatchJob",
    "WatchRequest",
    "WatchResult",
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
