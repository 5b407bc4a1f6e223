"""Event ingestion: EventBridge job state changes and spot warnings → the job registry.

Pure parsing (:mod:`.events`, :mod:`.status`) is separate from AWS access (:mod:`.recognise`, :mod:`.service`),
which takes its boto3 clients as parameters.
"""

from osprey_control.ingest.events import (
    INTERRUPTION_RISK,
    REBALANCE_RISK,
    IgnoredEvent,
    JobEvent,
    MalformedEventError,
    SpotEvent,
    parse_event,
)
from osprey_control.ingest.recognise import Recogniser, Recognition
from osprey_control.ingest.service import Ingestor, IngestOutcome
from osprey_control.ingest.settings import IngestSettings, SettingsError
from osprey_control.ingest.status import batch_status, sagemaker_status

__all__ = [
    "INTERRUPTION_RISK",
    "REBALANCE_RISK",
    "IgnoredEvent",
    "IngestOutcome",
    "IngestSettings",
    "Ingestor",
    "JobEvent",
    "MalformedEventError",
    "Recogniser",
    "Recognition",
    "SettingsError",
    "SpotEvent",
    "batch_status",
    "parse_event",
    "sagemaker_status",
]
