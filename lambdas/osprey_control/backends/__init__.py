"""The backends Osprey drives, one package each, behind one protocol (:class:`BackendDriver`) and one table
(:func:`driver_for`): ``sagemaker``, ``sagemaker_queue``, ``batch``, ``eks``, ``slurm``.

What every backend shares is here: the applier interface (a cycle's priority changes in, a per-job report out,
docs/design.md §6) and the rules every applier follows (:mod:`.actuation`). What a backend needs of its own (how
its jobs are recognised or discovered, its applier, its gang, its settings, its client) is in its package.

    >>> from osprey_control.backends import Deployment, appliers
    >>> every_applier = appliers(Deployment(clients={"batch": batch}))  # doctest: +SKIP

Only changed priorities are written, and only for jobs that opted in. See ``docs/metrics-and-actuation.md``
and ``docs/architecture.md``.
"""

from osprey_control.backends.actuation import (
    DERIVED_PRIORITY_TAG,
    NOT_ENABLED,
    Applier,
    ApplyReport,
    ApplyResult,
    ClientApplier,
    GuardedApplier,
    Housekeeper,
    LiveJob,
    Outcome,
    PriorityChange,
    ReadThenWriteApplier,
    apply_all,
    failure,
    is_enabled,
    prefilter,
)
from osprey_control.backends.declared import smallest
from osprey_control.backends.driver import BackendDriver, Deployment, EventBackend, EventDriver, RuntimeNaming
from osprey_control.backends.events import (
    JobDescription,
    JobEvent,
    JobEvents,
    NodeFinder,
    UnknownStatusError,
    parse_timestamp,
    required_text,
)
from osprey_control.backends.limits import (
    MALFORMED,
    MAX_TEXT,
    OVER_LIMIT,
    MalformedEventError,
    OverLimitError,
    check_tags,
)
from osprey_control.backends.table import BACKEND_PACKAGES, appliers, driver_for
from osprey_control.backends.write_order import write_phase

__all__ = [
    "BACKEND_PACKAGES",
    "DERIVED_PRIORITY_TAG",
    "MALFORMED",
    "MAX_TEXT",
    "NOT_ENABLED",
    "OVER_LIMIT",
    "Applier",
    "ApplyReport",
    "ApplyResult",
    "BackendDriver",
    "ClientApplier",
    "Deployment",
    "EventBackend",
    "EventDriver",
    "GuardedApplier",
    "Housekeeper",
    "JobDescription",
    "JobEvent",
    "JobEvents",
    "LiveJob",
    "MalformedEventError",
    "NodeFinder",
    "Outcome",
    "OverLimitError",
    "PriorityChange",
    "ReadThenWriteApplier",
    "RuntimeNaming",
    "UnknownStatusError",
    "appliers",
    "apply_all",
    "check_tags",
    "driver_for",
    "failure",
    "is_enabled",
    "parse_timestamp",
    "prefilter",
    "required_text",
    "smallest",
    "write_phase",
]
