"""Event ingestion: EventBridge job state changes and spot warnings → the job registry.

Pure parsing (:mod:`.events`, :mod:`.status`, :mod:`.limits`) is separate from AWS access (:mod:`.recognise`,
:mod:`.service`), which takes its boto3 clients as parameters. What ingest drops, and why, is :mod:`.drops`.
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
from osprey_control.ingest.status import batch_status, sagemaker_status

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
    "batch_status",
    "drop_metrics",
    "parse_event",
    "sagemaker_status",
]
