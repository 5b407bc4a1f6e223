"""Ingest Lambda: EventBridge → SQS → here, with SQS partial batch responses (Powertools ``BatchProcessor``).

Only a record that failed transiently, unexpectedly or on a fault of the deployment (access denied, Osprey's
table missing, an item too large: :mod:`osprey_control.ingest.faults`) is a batch item failure, so SQS
redelivers just that one and, after the queue's retries, keeps it in the dead-letter queue (alarm
``DeadLetters``); a permanently bad event is dropped (alarm ``DroppedEvents`` above a threshold): logged with its reason, counted as the EMF metric ``EventsDropped``
(dimension ``Reason``, :mod:`osprey_control.ingest.drops`) and reported as processed, so it is never
redelivered. The good records of a batch are recorded whatever the others do.

No Powertools Tracer: importing the X-Ray SDK would more than double the cold start of a function that makes
two or three DynamoDB calls per event.
"""

from __future__ import annotations

import os
from collections import Counter
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from osprey_control.ingest import DropReason, Ingestor, IngestSettings, Recogniser, drop_metrics
from osprey_control.registry import JobRegistry
from osprey_handlers._telemetry import publish

__all__ = ["handler", "ingestor", "record_handler", "settings"]

logger = Logger(service="osprey-ingest")
copy_config_to_registered_loggers(source_logger=logger, include={"osprey_control"})
processor = BatchProcessor(event_type=EventType.SQS)
# This invocation's dropped events by reason (Lambda runs one invocation at a time per container).
dropped: Counter[DropReason] = Counter()


@cache
def settings() -> IngestSettings:
    return IngestSettings.from_environment(os.environ)


@cache
def ingestor() -> Ingestor:
    """One per container: clients and recognition caches are reused across invocations."""
    config = settings()
    registry = JobRegistry(
        config.table_name, shards=config.shards, history_retention=config.history_retention
    )
    gangs = None
    if config.gang_state_machine_arn:
        # Only when gangs are deployed: the policy lookup (PolicySource: SSM, cached) and its imports.
        from osprey_control.policy_store import PolicySource  # noqa: PLC0415
        from osprey_control.steps.gang_start import GangRegistrar  # noqa: PLC0415

        gangs = GangRegistrar(config.gang_state_machine_arn, PolicySource(config.policy_prefix))
    return Ingestor(
        registry,
        recogniser=Recogniser(by_environment=config.recognise_by_environment),
        on_change=gangs,
    )


def record_handler(record: SQSRecord) -> str:
    outcome = ingestor().ingest_message(record.body)
    if outcome.action == "dropped":
        dropped[DropReason(outcome.reason)] += 1
    return outcome.action


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    dropped.clear()
    try:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    finally:
        # Also when every record failed (Powertools then raises so that the whole batch is retried).
        publish(drop_metrics(dropped), settings().metrics_namespace)
