"""Gang co-scheduling (docs/design.md §7). The front is the pure part: settings, the watch's decision, the
protocol every backend's gang implements (``backend``) and the watch's input (``request``); importing it loads no
AWS code, so the backends, the simulator and the CLI's views use it freely. The gang's state in the registry,
:mod:`osprey_control.gang.store`, is imported by name where it is needed, never through this front.

What each backend does for a gang lives in its own package (``osprey_control.backends.<name>.gang``, reached
through ``osprey_control.backends.driver_for``); the watch step is :mod:`osprey_control.steps.gang_watch`, its
start :mod:`osprey_control.steps.gang_start`. See docs/gangs.md.
"""

from osprey_control.gang.backend import NOT_OPTED_IN, STOP_REASON, GangBackend, NoRequeue, NotOptedInError
from osprey_control.gang.decision import Action, GangPhase, GangState, Readiness, Step, decide, start
from osprey_control.gang.request import WatchJob, WatchRequest, watch_input
from osprey_control.gang.settings import (
    GangSettings,
    poll_interval_seconds,
    requeue_delay_seconds,
    resolve_settings,
)

__all__ = [
    "NOT_OPTED_IN",
    "STOP_REASON",
    "Action",
    "GangBackend",
    "GangPhase",
    "GangSettings",
    "GangState",
    "NoRequeue",
    "NotOptedInError",
    "Readiness",
    "Step",
    "WatchJob",
    "WatchRequest",
    "decide",
    "poll_interval_seconds",
    "requeue_delay_seconds",
    "resolve_settings",
    "start",
    "watch_input",
]
