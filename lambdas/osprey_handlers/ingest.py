"""Ingest Lambda: EventBridge → SQS → here. Partial batch failures: only records that hit an AWS error are
retried; malformed events are logged and dropped (they are reported as processed).

No Powertools Tracer: importing the X-Ray SDK would more than double the cold start of a function that makes
two or three DynamoDB calls per event.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from osprey_control.ingest import Ingestor, IngestSettings, Recogniser
from osprey_control.registry.dynamodb import JobRegistry

__all__ = ["handler", "ingestor", "record_handler"]

logger = Logger(service="osprey-ingest")
copy_config_to_registered_loggers(source_logger=logger, include={"osprey_control"})
processor = BatchProcessor(event_type=EventType.SQS)


@cache
def ingestor() -> Ingestor:
    """One per container: clients and recognition caches are reused across invocations."""
    settings = IngestSettings.from_environment(os.environ)
    registry = JobRegistry(
        settings.table_name, shards=settings.shards, history_retention=settings.history_retention
    )
    gangs = None
    if settings.gang_state_machine_arn:
        # Only when gangs are deployed: the policy lookup (Powertools Parameters, cached) and its imports.
        from osprey_control.derive.policies import PolicySource  # noqa: PLC0415
        from osprey_control.gang import GangRegistrar  # noqa: PLC0415

        gangs = GangRegistrar(settings.gang_state_machine_arn, PolicySource(settings.policy_prefix))
    return Ingestor(
        registry,
        recogniser=Recogniser(by_environment=settings.recognise_by_environment),
        on_change=gangs,
    )


def record_handler(record: SQSRecord) -> str:
    return ingestor().ingest_message(record.body).action


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
