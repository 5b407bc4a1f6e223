"""Given a job's plan record in the registry (moto) or in OSPREY_PLAN_FILE, when train.py calls
``osprey.adjust_parallelism(step, current)``, then it returns the recommended plan only when it differs from
the current one and only every OSPREY_INTERVAL steps, returns None on any failure without raising or waiting
long, and appends every decision to the OSPREY_LOG trace."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

import osprey
from osprey_control.planner import Plan, cluster, evaluate, plan_record
from osprey_control.planner.model import ModelSpec
from osprey_control.planner.record import record_item
from osprey_control.registry import PLAN_SK
from osprey_control.registry.table import create_table

TABLE = "osprey-jobs"
JOB = "sagemaker#llm-pretrain-7"
CURRENT = Plan(tp=8, pp=1, dp=16, micro_batch=1)
PROPOSED = Plan(tp=4, pp=4, dp=8, micro_batch=1)
MODEL = ModelSpec(layers=96, hidden=16384, heads=128, seq=2048, vocab=51200, global_batch=1024)
CLUSTER = cluster(128, gpu="A100-80GB", gpus_per_node=8, network_gbits=1600)


def _record(plan: Plan, job: str = JOB) -> dict[str, Any]:
    return plan_record(job, evaluate(MODEL, CLUSTER, plan), reason="switch", expected_saving_fraction=0.2)


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        yield client


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return tmp_path / "trace.jsonl"


def _env(trace: Path, **extra: str) -> dict[str, str]:
    return {"OSPREY_LOG": str(trace), "OSPREY_TABLE_NAME": TABLE, "OSPREY_JOB_KEY": JOB, **extra}


def _entries(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []


def _put(client: Any, plan: Plan) -> dict[str, Any]:
    record = _record(plan)
    client.put_item(TableName=TABLE, Item=record_item(f"JOB#{JOB}", record))
    return record


def test_new_plan_from_the_registry_is_returned_and_traced(dynamodb: Any, trace: Path) -> None:
    # Given the control plane recommended 4x4x8 for a job running 8x16
    record = _put(dynamodb, PROPOSED)
    # When the job asks at step 60
    plan = osprey.adjust_parallelism(60, CURRENT, client=dynamodb, environ=_env(trace))
    # Then it gets the new plan, and the trace records the decision
    assert plan == PROPOSED
    (entry,) = _entries(trace)
    assert entry["decision"] == "new-plan"
    assert entry["step"] == 60
    assert entry["interval"] == 60
    assert entry["current"] == CURRENT.to_dict()
    assert entry["recommended"] == PROPOSED.to_dict()
    assert entry["plan_id"] == record["plan_id"]
    assert entry["source"] == f"dynamodb:{TABLE}"
    assert entry["job"] == f"JOB#{JOB}"
    assert entry["expected_saving_fraction"] == pytest.approx(0.2)


def test_same_plan_is_none_unchanged(dynamodb: Any, trace: Path) -> None:
    _put(dynamodb, CURRENT)
    assert osprey.adjust_parallelism(120, CURRENT, client=dynamodb, environ=_env(trace)) is None
    assert [e["decision"] for e in _entries(trace)] == ["unchanged"]


def test_current_may_be_a_mapping(dynamodb: Any, trace: Path) -> None:
    _put(dynamodb, PROPOSED)
    current = {"tp": 8, "pp": 1, "dp": 16, "micro_batch": 1}
    assert osprey.adjust_parallelism(60, current, client=dynamodb, environ=_env(trace)) == PROPOSED


def test_only_every_interval_steps_and_no_io_in_between(trace: Path) -> None:
    class Refusing:
        def get_item(self, **_: Any) -> Any:
            raise AssertionError("adjust_parallelism read the registry off its interval")

    for step in (1, 59, 61, 119):
        assert osprey.adjust_parallelism(step, CURRENT, client=Refusing(), environ=_env(trace)) is None
    assert not trace.exists()


def test_osprey_interval_sets_the_decision_points(dynamodb: Any, trace: Path) -> None:
    _put(dynamodb, PROPOSED)
    env = _env(trace, OSPREY_INTERVAL="100")
    assert osprey.adjust_parallelism(60, CURRENT, client=dynamodb, environ=env) is None
    assert osprey.adjust_parallelism(200, CURRENT, client=dynamodb, environ=env) == PROPOSED
    assert [(e["step"], e["interval"]) for e in _entries(trace)] == [(200, 100)]


def test_no_record_is_none(dynamodb: Any, trace: Path) -> None:
    assert osprey.adjust_parallelism(60, CURRENT, client=dynamodb, environ=_env(trace)) is None
    assert _entries(trace)[0]["decision"] == "no-record"


def test_record_for_another_world_size_is_ignored(dynamodb: Any, trace: Path) -> None:
    _put(dynamodb, PROPOSED)
    small = Plan(tp=4, pp=1, dp=16, micro_batch=1)
    assert osprey.adjust_parallelism(60, small, client=dynamodb, environ=_env(trace)) is None
    assert _entries(trace)[0]["decision"] == "world-size-mismatch"


def test_missing_table_is_none_with_the_error_traced(dynamodb: Any, trace: Path) -> None:
    env = _env(trace, OSPREY_TABLE_NAME="no-such-table")
    assert osprey.adjust_parallelism(60, CURRENT, client=dynamodb, environ=env) is None
    (entry,) = _entries(trace)
    assert entry["decision"] == "error"
    assert "ResourceNotFoundException" in entry["error"]


def test_malformed_record_is_none(dynamodb: Any, trace: Path) -> None:
    dynamodb.put_item(
        TableName=TABLE,
        Item={"pk": {"S": f"PLAN#{JOB}"}, "sk": {"S": PLAN_SK}, "plan": {"S": json.dumps({"version": "1"})}},
    )
    assert osprey.adjust_parallelism(60, CURRENT, client=dynamodb, environ=_env(trace)) is None
    (entry,) = _entries(trace)
    assert entry["decision"] == "error"
    assert "tp: must be a positive integer" in entry["error"]


def test_a_hanging_registry_does_not_block_training(trace: Path) -> None:
    # Given a client that never answers (until the test releases it)
    release = threading.Event()

    class Hanging:
        def get_item(self, **_: Any) -> Any:
            release.wait(30)
            return {}

    try:
        # When the job asks with a short timeout, then it gets None and the trace says it timed out
        plan = osprey.adjust_parallelism(60, CURRENT, client=Hanging(), environ=_env(trace), timeout_s=0.05)
        assert plan is None
        (entry,) = _entries(trace)
        assert entry["decision"] == "error"
        assert "timed out after 0.05 s" in entry["error"]
    finally:
        release.set()


def test_job_key_from_the_runtime_environment(dynamodb: Any, trace: Path) -> None:
    # Given a Batch job (no OSPREY_JOB_KEY): the key is the registry's JOB#batch#<job id>
    record = _record(PROPOSED, "batch#abc-123")
    dynamodb.put_item(TableName=TABLE, Item=record_item("JOB#batch#abc-123", record))
    env = {"OSPREY_LOG": str(trace), "OSPREY_TABLE_NAME": TABLE, "AWS_BATCH_JOB_ID": "abc-123#2"}
    assert osprey.adjust_parallelism(0, CURRENT, client=dynamodb, environ=env) == PROPOSED
    assert _entries(trace)[0]["job"] == "JOB#batch#abc-123"


def test_unknown_job_is_an_error_that_says_what_to_set(trace: Path) -> None:
    env = {"OSPREY_LOG": str(trace), "OSPREY_TABLE_NAME": TABLE}
    assert osprey.adjust_parallelism(0, CURRENT, environ=env) is None
    assert "set OSPREY_JOB_KEY" in _entries(trace)[0]["error"]


def test_no_source_is_none(trace: Path) -> None:
    assert osprey.adjust_parallelism(0, CURRENT, environ={"OSPREY_LOG": str(trace)}) is None
    assert _entries(trace)[0]["decision"] == "no-source"


def test_plan_file_override(tmp_path: Path, trace: Path) -> None:
    # Given OSPREY_PLAN_FILE (no registry at all)
    plan_file = tmp_path / "plan.json"
    env = {"OSPREY_LOG": str(trace), "OSPREY_PLAN_FILE": str(plan_file), "OSPREY_INTERVAL": "10"}
    # When the file does not exist yet, then nothing is recommended
    assert osprey.adjust_parallelism(10, CURRENT, environ=env) is None
    # When the file is written, then the next decision point returns its plan
    plan_file.write_text(json.dumps(_record(PROPOSED)))
    assert osprey.adjust_parallelism(20, CURRENT, environ=env) == PROPOSED
    # And a broken file is an error, not an exception
    plan_file.write_text("{not json")
    assert osprey.adjust_parallelism(30, CURRENT, environ=env) is None
    decisions = [(e["step"], e["decision"], e["source"]) for e in _entries(trace)]
    assert decisions == [
        (10, "no-record", f"file:{plan_file}"),
        (20, "new-plan", f"file:{plan_file}"),
        (30, "error", f"file:{plan_file}"),
    ]


def test_bad_current_or_bad_interval_never_raise(trace: Path, tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(_record(PROPOSED)))
    env = {"OSPREY_LOG": str(trace), "OSPREY_PLAN_FILE": str(plan_file)}
    assert osprey.adjust_parallelism(0, {"tp": 0}, environ=env) is None
    assert _entries(trace)[-1]["decision"] == "error"
    # An invalid OSPREY_INTERVAL falls back to 60 and says so in the trace
    bad = {**env, "OSPREY_INTERVAL": "often"}
    assert osprey.adjust_parallelism(60, CURRENT, environ=bad) == PROPOSED
    assert "OSPREY_INTERVAL must be a positive integer" in _entries(trace)[-1]["error"]


def test_an_unwritable_trace_does_not_raise(tmp_path: Path) -> None:
    env = {"OSPREY_LOG": str(tmp_path / "missing-dir" / "trace.jsonl")}
    assert osprey.adjust_parallelism(0, CURRENT, environ=env) is None


def test_registry_item_round_trip_and_checks() -> None:
    from osprey_control.planner.record import PlanRecordError, record_from_item  # noqa: PLC0415

    record = _record(PROPOSED)
    item = record_item(f"JOB#{JOB}", record)
    assert item["pk"] == {"S": f"PLAN#{JOB}"}
    assert item["sk"] == {"S": "PLAN"}
    assert record_from_item(item) == record
    with pytest.raises(PlanRecordError, match="pk: must be a job partition key"):
        record_item("sagemaker#x", record)
    with pytest.raises(PlanRecordError, match="plan: not valid JSON"):
        record_from_item({"plan": {"S": "{"}})
