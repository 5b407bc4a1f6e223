"""Event ingestion: EventBridge job state changes and spot warnings → the job registry.

Pure parsing of the envelope and the spot events (:mod:`.events`, :mod:`.limits`) is separate from AWS access
(:mod:`.recognise`, :mod:`.service`), which takes its boto3 clients as parameters. A job event is read and its
job looked up by its backend's package (``DRIVER.events``, :mod:`osprey_control.backends.events`), reached
through :func:`osprey_control.backends.driver_for`. What ingest drops, and why, is :mod:`.drops`.
"""

from osprey_control.ingest.drops import (
    EVENTS_DROPPED,
    DropReason,
    MalformedEventError,
    OverLimitError,
    UnsupportedEventError,
    drop_metrics,
)
from osprey_control.ingest.events import (
    INTERRUPTION_RISK,
    REBALANCE_RISK,
    IgnoredEvent,
    JobEvent,
    SpotEvent,
    parse_event,
)
from osprey_control.ingest.recognise import Recogniser, Recognition
from osprey_control.ingest.service import Ingestor, IngestOutcome
from osprey_control.ingest.settings import IngestSettings, SettingsError

__all__ = [
    "EVENTS_DROPPED",
    "INTERRUPTION_RISK",
    "REBALANCE_RISK",
    "DropReason",
    "IgnoredEvent",
    "IngestOutcome",
    "IngestSettings",
    "Ingestor",
    "JobEvent",
    "MalformedEventError",
    "OverLimitError",
    "Recogniser",
    "Recognition",
    "SettingsError",
    "SpotEvent",
    "UnsupportedEventError",
    "drop_metrics",
    "parse_event",
]
