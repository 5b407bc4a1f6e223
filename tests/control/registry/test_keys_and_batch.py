"""Given registry keys and batched reads, when they are parsed or read under throttling, then the one key layout
round-trips every backend's ids, bad keys name what is allowed, and unprocessed keys are asked again, with the
ones DynamoDB never returned handed back."""

from __future__ import annotations

from typing import Any

import pytest

from osprey_control.registry import Backend, JobKey
from osprey_control.registry.batch import MAX_KEYS_PER_BATCH_GET, batch_get
from osprey_control.registry.keys import (
    APPLY_PREFIX,
    DECISION_PREFIX,
    GANG_PREFIX,
    ITEM_PREFIXES,
    JOB_PREFIX,
    PLAN_PREFIX,
    PLAN_REQUEST_PREFIX,
    STATUS_PREFIX,
    is_job_pk,
    item_pk,
    job_pk,
    job_pk_of,
    key_from_pk,
)


@pytest.mark.parametrize(
    "key",
    [
        JobKey(Backend.SAGEMAKER, "train-1"),
        JobKey(Backend.BATCH, "a1b2#3"),  # a Batch array child id holds '#'
        JobKey(Backend.EKS, "team-a/llm#7"),
    ],
)
def test_a_job_key_round_trips_through_its_partition_key(key: JobKey) -> None:
    assert JobKey.parse(str(key)) == key
    assert key_from_pk(job_pk(key)) == key
    assert is_job_pk(job_pk(key))


@pytest.mark.parametrize("text", ["", "train-1", "lsf#1", "batch#"])
def test_a_bad_job_key_names_the_allowed_backends(text: str) -> None:
    with pytest.raises(ValueError, match="sagemaker, sagemaker-queued, batch, eks, slurm"):
        JobKey.parse(text)
    assert not is_job_pk(f"JOB#{text}")


@pytest.mark.parametrize(
    "prefix", [DECISION_PREFIX, APPLY_PREFIX, STATUS_PREFIX, GANG_PREFIX, PLAN_REQUEST_PREFIX, PLAN_PREFIX]
)
def test_each_of_a_jobs_item_types_has_its_own_partition_naming_the_job(prefix: str) -> None:
    # Given a job whose native id holds '#'
    key = JobKey(Backend.BATCH, "a1b2#3")
    # When the partition of one of its other item types is built, from the key or from the job's own pk
    pk = item_pk(prefix, key)
    # Then it is that type's prefix and the job, reads back as the job, and is not the job's own partition
    assert pk == f"{prefix}batch#a1b2#3" == item_pk(prefix, job_pk(key))
    assert key_from_pk(pk, prefix) == key
    assert job_pk_of(pk, prefix) == job_pk(key)
    assert is_job_pk(pk, prefix)
    assert not is_job_pk(pk)


def test_no_item_type_prefix_starts_another() -> None:
    # (an IAM pattern PLAN#* must not grant PLANREQ#..., nor JOB#* anything but jobs)
    for prefix in ITEM_PREFIXES:
        assert [other for other in ITEM_PREFIXES if other != prefix and other.startswith(prefix)] == []


def test_an_unknown_item_prefix_names_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match=f"{JOB_PREFIX}, {DECISION_PREFIX}"):
        item_pk("INSTANCE#", JobKey(Backend.BATCH, "x"))


class ThrottlingClient:
    """Answers BatchGetItem leaving the last key of each call unprocessed ``stubborn`` times."""

    def __init__(self, stubborn: int) -> None:
        self.stubborn = stubborn
        self.calls: list[int] = []

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        ((table, request),) = RequestItems.items()
        keys = request["Keys"]
        self.calls.append(len(keys))
        if self.stubborn and keys:
            self.stubborn -= 1
            served, left = keys[:-1], keys[-1:]
        else:
            served, left = keys, []
        response: dict[str, Any] = {"Responses": {table: [dict(key, v={"S": "x"}) for key in served]}}
        if left:
            response["UnprocessedKeys"] = {table: {"Keys": left}}
        return response


def _keys(count: int) -> list[dict[str, Any]]:
    return [{"pk": {"S": f"JOB#batch#{n}"}, "sk": {"S": "GANG"}} for n in range(count)]


def test_unprocessed_keys_are_asked_again_in_chunks_of_one_hundred() -> None:
    # Given 150 keys and a table that leaves one key unprocessed on the first call
    client = ThrottlingClient(stubborn=1)
    # When they are read
    read = batch_get(client, "t", _keys(150), sleep=lambda _s: None)
    # Then every item is found in two chunks plus one retry of the left-over key
    assert len(read.items) == 150
    assert read.unread == []
    assert client.calls == [MAX_KEYS_PER_BATCH_GET, 1, 50]


def test_keys_dynamodb_never_returns_are_handed_back() -> None:
    client = ThrottlingClient(stubborn=100)
    read = batch_get(client, "t", _keys(3), attempts=3, sleep=lambda _s: None)
    assert len(read.items) == 2
    assert [key["pk"]["S"] for key in read.unread] == ["JOB#batch#2"]
