"""One definition of opt-in (issue 28 item 8) and opt-in tags added after a job's first event (item 7).

Given the spellings of "enabled" that some reader used to accept (``1``, ``True``, `` TRUE ``), when ingest,
the appliers' live-tag check, EKS discovery's label check and the Slurm marker read them, then all agree: the
job is not managed, and the reason says to write exactly ``osprey:enabled=true``, the value IAM's
``StringEquals`` condition requires. Given ``true``, all agree it is managed."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from osprey_control.backends import is_enabled
from osprey_control.backends.eks.resources import is_enabled as eks_is_enabled
from osprey_control.backends.slurm.marker import block_from_comment, marker
from osprey_control.contract import (
    ENABLED_KUBERNETES,
    ENABLED_TAG,
    OPT_IN,
    OspreyBlockError,
    from_kubernetes,
    opt_in,
    parse_block,
    to_kubernetes,
    to_tags,
)
from osprey_control.ingest import Ingestor, Recogniser
from osprey_control.ingest.recognise import NOT_MANAGED_TTL_S
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.ingest.conftest import BATCH, SERVICE, item_count, load_event

BATCH_KEY = JobKey(Backend.BATCH, "4c7599ae-0a82-49aa-ba5a-4727fcce14a8")
SERVICE_KEY = JobKey(Backend.SAGEMAKER_QUEUED, "0bb17543-ece6-4480-b1a7-a556d344746b")
NOT_OPT_INS = ["1", "True", " TRUE ", "TRUE", "true ", "yes"]


@pytest.fixture
def batch_client() -> Iterator[Stubber]:
    stubber = Stubber(boto3.client("batch", region_name="us-east-1"))
    stubber.activate()
    yield stubber
    stubber.assert_no_pending_responses()
    stubber.deactivate()


def _batch_event(tags: dict[str, str], *, time: str = "2026-03-01T12:06:40Z") -> dict[str, Any]:
    event = load_event(BATCH)
    event["time"] = time
    event["detail"]["tags"] = {"resourceArn": event["detail"]["jobArn"], **tags}
    del event["detail"]["container"]["containerInstanceArn"]  # no ECS lookup
    return event


def _comment_managed(comment: str) -> bool:
    try:
        return block_from_comment(comment) is not None
    except OspreyBlockError:
        return False


@pytest.mark.parametrize("value", NOT_OPT_INS)
def test_a_near_miss_opt_in_is_not_managed_by_any_reader_and_the_reason_says_what_to_write(
    value: str, registry: JobRegistry, dynamodb: Any
) -> None:
    # Given a Batch job tagged osprey:enabled=<value> and a policy
    event = _batch_event({ENABLED_TAG: value, "osprey:policy": "training-policy"})
    # When ingest reads its event
    outcome = Ingestor(registry, recogniser=Recogniser()).ingest(event)
    # Then the job is not managed (nothing is written), and the reason names the value and what to write
    assert outcome.action == "ignored"
    assert repr(value) in outcome.reason
    assert f"write {ENABLED_TAG}=true" in outcome.reason
    assert item_count(dynamodb) == 0
    # And the appliers' live-tag check, EKS's label check and the Slurm marker agree with ingest
    assert not is_enabled({ENABLED_TAG: value})
    assert not is_enabled([{"Key": ENABLED_TAG, "Value": value}])
    assert not eks_is_enabled({"metadata": {"labels": {ENABLED_KUBERNETES: value}}})
    with pytest.raises(OspreyBlockError, match=f"write {ENABLED_KUBERNETES}=true"):
        from_kubernetes({ENABLED_KUBERNETES: value, "osprey.aws/policy": "training-policy"})
    if value == value.strip():  # a comment's tokens are split on white space
        assert not _comment_managed(f"{ENABLED_TAG}={value},osprey:policy=training-policy")
    assert not opt_in(ENABLED_TAG, value).managed


def test_exactly_true_is_managed_by_every_reader(registry: JobRegistry) -> None:
    # Given a Batch job tagged exactly osprey:enabled=true
    event = _batch_event({ENABLED_TAG: "true", "osprey:policy": "training-policy"})
    # When ingest reads its event, then it is registered, and every other reader agrees
    assert Ingestor(registry, recogniser=Recogniser()).ingest(event).action == "registered"
    assert is_enabled({ENABLED_TAG: "true"})
    assert eks_is_enabled({"metadata": {"labels": {ENABLED_KUBERNETES: "true"}}})
    assert _comment_managed("osprey:enabled=true,osprey:policy=training-policy")


def test_the_sdk_writes_the_one_value_and_iam_compares_it_exactly() -> None:
    # Given a block, when the SDK writes its tags, labels and Slurm marker
    block = parse_block({"priority_derivation_profile": "training-policy"})
    labels, _ = to_kubernetes(block)
    # Then each carries exactly the one opt-in value
    assert to_tags(block)[ENABLED_TAG] == OPT_IN == "true"
    assert labels[ENABLED_KUBERNETES] == OPT_IN
    assert marker(block).startswith(f"{ENABLED_TAG}={OPT_IN},")
    # And the IAM condition on every backend write matches that value exactly (not StringEqualsIgnoreCase)
    from osprey.local.fleet import ENABLED_TAGS  # noqa: PLC0415 - the local fleet's jobs
    from osprey_infra.permissions import TAGGED  # noqa: PLC0415

    assert ENABLED_TAGS == {ENABLED_TAG: OPT_IN}
    assert {"StringEquals": {f"aws:ResourceTag/{ENABLED_TAG}": OPT_IN}} == TAGGED


def test_a_job_tagged_after_its_first_event_is_managed_from_its_next_event(registry: JobRegistry) -> None:
    # Given a Batch job whose first event carries no opt-in (it is ignored) ...
    ingestor = Ingestor(registry, recogniser=Recogniser())
    first = ingestor.ingest(_batch_event({"team": "research"}, time="2026-03-01T12:06:40Z"))
    assert first.action == "ignored"
    # When the job is tagged and its next event carries the tag
    later = _batch_event(
        {ENABLED_TAG: "true", "osprey:policy": "training-policy"}, time="2026-03-01T12:07:40Z"
    )
    outcome = ingestor.ingest(later)
    # Then it is registered: the cached "not managed" does not outlive the tag
    assert outcome.action == "registered"
    record = registry.get(BATCH_KEY)
    assert record is not None
    assert record.policy == "training-policy"


def _service_job(tags: dict[str, str]) -> dict[str, Any]:
    return {
        "jobArn": f"arn:aws:batch:us-east-1:123456789012:service-job/{SERVICE_KEY.native_id}",
        "jobId": SERVICE_KEY.native_id,
        "jobName": "llama-queued",
        "jobQueue": "arn:aws:batch:us-east-1:123456789012:job-queue/osprey-sagemaker",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "status": "RUNNING",
        "createdAt": 1772366600058,
        "startedAt": 1772366900058,
        "serviceRequestPayload": json.dumps({"ResourceConfig": {"InstanceType": "ml.p4d.24xlarge"}}),
        "tags": tags,
    }


def test_a_service_job_tagged_after_its_first_lookup_is_managed_once_the_answer_expires(
    registry: JobRegistry, batch_client: Stubber
) -> None:
    # Given a service job whose first lookup finds no opt-in tag, with a clock ingest can advance
    now = [1000.0]
    ingestor = Ingestor(registry, recogniser=Recogniser(batch=batch_client.client, clock=lambda: now[0]))
    request = {"jobId": SERVICE_KEY.native_id}
    batch_client.add_response("describe_service_job", _service_job({"team": "research"}), request)
    event = load_event(SERVICE)
    assert ingestor.ingest(event).action == "ignored"
    # When its next event arrives within the answer's lifetime, then no second lookup is made
    assert ingestor.ingest(copy.deepcopy(event)).action == "ignored"
    # And when the job has been tagged since and an event arrives after the answer expired
    now[0] += NOT_MANAGED_TTL_S + 1
    tagged = {ENABLED_TAG: "true", "osprey:policy": "training-policy"}
    batch_client.add_response("describe_service_job", _service_job(tagged), request)
    later = copy.deepcopy(event)
    later["time"] = "2026-03-01T12:20:00Z"
    # Then the job is looked up again and registered
    assert ingestor.ingest(later).action == "registered"
    assert registry.get(SERVICE_KEY) is not None
