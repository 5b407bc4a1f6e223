"""Given an SQS batch of EventBridge events, when the ingest Lambda runs, then good records are recorded,
malformed ones are logged and dropped (not failures), and only a record whose DynamoDB write is throttled is
reported as a batch item failure for SQS to redeliver."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from osprey_control.ingest import SettingsError
from osprey_control.ingest.settings import IngestSettings
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.ingest.conftest import BATCH, SAGEMAKER, TABLE, ingest_context, load_event, sqs_batch


def _batch_event(job_id: str) -> str:
    event = load_event(BATCH)
    event["detail"]["jobId"] = job_id
    event["detail"]["jobArn"] = f"arn:aws:batch:us-east-1:123456789012:job/{job_id}"
    del event["detail"]["container"]["containerInstanceArn"]
    return json.dumps(event)


def test_malformed_record_is_skipped_and_the_rest_succeed(ingest_module: Any, registry: JobRegistry) -> None:
    # Given a batch of a good event, a non-JSON body, an event without detail, and another good event
    broken = load_event(BATCH)
    del broken["detail"]
    event = sqs_batch(_batch_event("job-1"), "{not json", json.dumps(broken), _batch_event("job-2"))
    # When the Lambda runs
    response = ingest_module.handler(event, ingest_context())
    # Then no record is reported failed, and both good jobs are registered
    assert response == {"batchItemFailures": []}
    assert {record.native_id for record in registry.list_active()} == {"job-1", "job-2"}


def test_throttled_write_fails_only_that_record(
    ingest_module: Any, registry: JobRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given DynamoDB throttles (after botocore's retries) every write of job-2
    client = ingest_module.ingestor().registry.client

    def throttle(params: dict[str, Any], **_: Any) -> None:
        if "job-2" in json.dumps(params.get("Item", {})):
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                "PutItem",
            )

    client.meta.events.register("before-parameter-build.dynamodb.PutItem", throttle)
    event = sqs_batch(_batch_event("job-1"), _batch_event("job-2"), json.dumps(load_event(SAGEMAKER)))
    # When the Lambda runs
    response = ingest_module.handler(event, ingest_context())
    # Then only job-2's message is returned for redelivery; the others are recorded
    assert response == {"batchItemFailures": [{"itemIdentifier": "message-1"}]}
    assert registry.get(JobKey(Backend.BATCH, "job-1")) is not None
    assert registry.get(JobKey(Backend.BATCH, "job-2")) is None
    assert registry.get(JobKey(Backend.SAGEMAKER, "llama-pretrain-2026-03-01")) is not None


def test_missing_table_name_says_which_variable_to_set() -> None:
    with pytest.raises(SettingsError, match="OSPREY_TABLE_NAME"):
        IngestSettings.from_environment({})
    with pytest.raises(SettingsError, match="OSPREY_REGISTRY_SHARDS"):
        IngestSettings.from_environment({"OSPREY_TABLE_NAME": TABLE, "OSPREY_REGISTRY_SHARDS": "0"})
    settings = IngestSettings.from_environment(
        {"OSPREY_TABLE_NAME": TABLE, "OSPREY_HISTORY_RETENTION_DAYS": "7"}
    )
    assert settings.history_retention.days == 7
