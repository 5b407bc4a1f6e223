"""Given a training job, when it asks to be planned with ``osprey.request_planning(model, cluster, current)``,
then its plan request (``sk = PLANREQ``) is in the registry and reads back as the planner's inputs; bad inputs
are rejected before anything is written, each naming its field; and ``adjust_parallelism`` keeps the
request's step and current plan up to date at every decision point."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

import osprey
from osprey.planning import PlanRequestError, report_plan_progress
from osprey_control.planner import Plan, cluster
from osprey_control.planner.model import ModelSpec, OptimizerSharding, Recompute
from osprey_control.planner.replan import Measurement, replan
from osprey_control.planner.request import REQUEST_SK, build_request, request_from_item
from osprey_control.registry.table import create_table

TABLE = "osprey-jobs"
JOB = "batch#train-42"
PK = f"JOB#{JOB}"
MODEL = {"layers": 24, "hidden": 4096, "heads": 32, "seq": 2048, "vocab": 51200, "global_batch": 512}
CURRENT = {"tp": 2, "pp": 1, "dp": 32, "micro_batch": 16}
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        yield client


def _env(**extra: str) -> dict[str, str]:
    return {"OSPREY_TABLE_NAME": TABLE, "OSPREY_JOB_KEY": JOB, **extra}


def _stored(client: Any) -> dict[str, Any] | None:
    item: dict[str, Any] | None = client.get_item(
        TableName=TABLE, Key={"pk": {"S": f"PLANREQ#{JOB}"}, "sk": {"S": REQUEST_SK}}
    ).get("Item")
    return item


def _fields(error: pytest.ExceptionInfo[PlanRequestError]) -> set[str]:
    return {problem.field for problem in error.value.errors}


def test_a_request_is_stored_and_reads_back_as_planner_inputs(dynamodb: Any) -> None:
    # Given a job on 64 GPUs of p4de.24xlarge running 2x1x32
    # When it asks to be planned
    osprey.request_planning(
        MODEL,
        "p4de.24xlarge",
        CURRENT,
        step=120,
        client=dynamodb,
        environ=_env(OSPREY_INTERVAL="50"),
        now=NOW,
    )
    # Then the request item holds the planner's inputs, and reads back as the same model, cluster and plan
    item = _stored(dynamodb)
    assert item is not None
    assert item["current_key"] == {"S": "2,1,32,16,1"}
    assert item["created_at"] == item["updated_at"] == {"S": "2026-01-01T00:00:00Z"}
    request = request_from_item(item)
    assert request.job_id == JOB
    # (options not given are left to the search; the model carries Megatron's usual ones)
    assert request.model == ModelSpec(
        layers=24,
        hidden=4096,
        heads=32,
        seq=2048,
        vocab=51200,
        global_batch=512,
        recompute=Recompute.SELECTIVE,
        optimizer_sharding=OptimizerSharding.ZERO1,
        flash_attention=True,
        comm_overlap=True,
    )
    assert request.cluster == cluster(64, instance_type="p4de.24xlarge")
    assert request.current == Plan(tp=2, pp=1, dp=32, micro_batch=16)
    assert (request.step, request.since_step, request.interval) == (120, 120, 50)


def test_a_cluster_mapping_and_a_model_spec_are_accepted() -> None:
    spec = ModelSpec(layers=24, hidden=4096, heads=32, seq=2048, vocab=51200, global_batch=512)
    item = build_request(
        PK,
        model=spec,
        cluster={"gpus": 64, "gpu": "A100-80GB", "network_gbits": 200, "gpus_per_node": 8},
        current=CURRENT,
    )
    request = request_from_item(item)
    assert request.model == spec
    assert request.cluster.network_gbits == 200
    assert request.cluster.gpu.name == "A100-80GB"


def test_every_bad_field_is_named_and_nothing_is_written(dynamodb: Any) -> None:
    # Given inputs with several mistakes
    # When the job asks to be planned, then one error lists each field, and nothing is written
    with pytest.raises(PlanRequestError) as error:
        osprey.request_planning(
            {**MODEL, "layers": 0, "colour": "red"},
            {"instance_type": "p9.huge"},
            {"tp": 2, "pp": 1, "dp": "many", "micro_batch": 16},
            client=dynamodb,
            environ=_env(),
        )
    assert {"model.layers", "model.colour", "current.dp"} <= _fields(error)
    assert "model.colour: unknown key; allowed: layers, hidden" in str(error.value)
    assert _stored(dynamodb) is None


def test_model_cluster_and_plan_are_checked_together() -> None:
    with pytest.raises(PlanRequestError) as unknown_type:
        build_request(PK, model=MODEL, cluster="p9.huge", current=CURRENT)
    assert "cluster.instance_type: got 'p9.huge'; allowed: p4d.24xlarge" in str(unknown_type.value)
    with pytest.raises(PlanRequestError) as world:
        build_request(PK, model=MODEL, cluster="p4de.24xlarge", current=CURRENT, gpus=128)
    assert "current: tp*pp*dp = 64 but the cluster has 128 GPUs" in str(world.value)
    with pytest.raises(PlanRequestError) as heads:
        build_request(PK, model={**MODEL, "heads": 3}, cluster="p4de.24xlarge", current=CURRENT)
    assert "model.heads: must divide hidden (4096), got 3" in str(heads.value)
    with pytest.raises(PlanRequestError) as steps:
        build_request(PK, model=MODEL, cluster="p4de.24xlarge", current=CURRENT, step=5, since_step=9)
    assert _fields(steps) == {"since_step"}
    with pytest.raises(PlanRequestError) as misplaced:
        build_request(PK, model={**MODEL, "gpus": 64}, cluster="p4de.24xlarge", current=CURRENT)
    assert "model.gpus: not a model key" in str(misplaced.value)


def test_without_a_table_or_a_job_the_error_says_what_to_set() -> None:
    with pytest.raises(PlanRequestError) as error:
        osprey.request_planning(MODEL, "p4de.24xlarge", CURRENT, environ={})
    assert _fields(error) == {"table", "job_key"}
    assert "set OSPREY_TABLE_NAME" in str(error.value)
    assert "set OSPREY_JOB_KEY" in str(error.value)


def test_a_broken_item_names_the_attribute() -> None:
    item = build_request(PK, model=MODEL, cluster="p4de.24xlarge", current=CURRENT)
    with pytest.raises(PlanRequestError, match="config: not valid JSON"):
        request_from_item({**item, "config": {"S": "{"}})
    with pytest.raises(PlanRequestError, match="step: must be a non-negative integer"):
        request_from_item({**item, "step": {"N": "-3"}})
    with pytest.raises(PlanRequestError, match=r"model\.layers: must be a positive integer"):
        request_from_item(
            {**item, "config": {"S": json.dumps({**json.loads(item["config"]["S"]), "layers": 0})}}
        )
    with pytest.raises(PlanRequestError, match="current: missing"):
        request_from_item({key: value for key, value in item.items() if key != "current"})


def test_progress_updates_the_step_and_adopts_a_new_plan(dynamodb: Any) -> None:
    # Given a job without a request: progress writes nothing
    assert report_plan_progress(60, CURRENT, client=dynamodb, environ=_env()) == "no-request"
    assert _stored(dynamodb) is None
    # Given a request at step 0 for 2x1x32
    osprey.request_planning(MODEL, "p4de.24xlarge", CURRENT, client=dynamodb, environ=_env())
    # When the job reports step 60 on the same plan, then only the step moves
    assert report_plan_progress(60, CURRENT, client=dynamodb, environ=_env()) == "updated"
    request = request_from_item(_stored(dynamodb) or {})
    assert (request.step, request.since_step) == (60, 0)
    # When it reports step 120 on another plan, then that plan is current since step 120
    new = {"tp": 2, "pp": 4, "dp": 8, "micro_batch": 1}
    assert report_plan_progress(120, new, client=dynamodb, environ=_env()) == "adopted"
    request = request_from_item(_stored(dynamodb) or {})
    assert (request.step, request.since_step, request.current) == (120, 120, Plan(2, 4, 8, 1))


def test_adjust_parallelism_reports_progress_at_each_decision_point(dynamodb: Any) -> None:
    # Given a planned job
    osprey.request_planning(MODEL, "p4de.24xlarge", CURRENT, client=dynamodb, environ=_env())
    # When the training loop asks at step 180 (no plan record yet)
    assert osprey.adjust_parallelism(180, CURRENT, client=dynamodb, environ=_env()) is None
    # Then the request knows the job is at step 180 on its plan since step 0
    request = request_from_item(_stored(dynamodb) or {})
    assert (request.step, request.since_step) == (180, 0)


GPT3_175B = {"layers": 96, "hidden": 12288, "heads": 96, "seq": 2048, "vocab": 51200, "global_batch": 1536}
P5_1024 = {"instance_type": "p5.48xlarge", "gpus": 1024}
RUNNING_175B = {"tp": 8, "pp": 8, "dp": 16, "micro_batch": 1}


def test_a_job_without_an_interleaved_schedule_is_never_recommended_one() -> None:
    # Given GPT-3 175B on 1,024 H100, where the planner's best uses Megatron's interleaved schedule
    anything = request_from_item(build_request(PK, model=GPT3_175B, cluster=P5_1024, current=RUNNING_175B))
    unconstrained = replan(
        anything.current_plan(), Measurement(step=600), interval=1, options=anything.options
    )
    assert unconstrained.switch
    assert unconstrained.proposed is not None
    assert unconstrained.proposed.plan.virtual > 1
    # When the job says its training code runs one chunk per GPU (DeepSpeed's pipeline, examples/train.py)
    item = build_request(PK, model=GPT3_175B, cluster=P5_1024, current=RUNNING_175B, max_virtual=1)
    request = request_from_item(item)
    # Then the plan step's search stays within what it can run, and the request keeps the limit
    decision = replan(request.current_plan(), Measurement(step=600), interval=1, options=request.options)
    assert decision.switch
    assert decision.proposed is not None
    assert decision.proposed.plan.virtual == 1
    assert request.options.max_virtual == 1
    assert json.loads(item["config"]["S"])["max-virtual"] == 1


def test_max_virtual_is_checked_with_the_plan_the_job_runs() -> None:
    with pytest.raises(PlanRequestError) as zero:
        build_request(PK, model=GPT3_175B, cluster=P5_1024, current=RUNNING_175B, max_virtual=0)
    assert "max_virtual: must be a positive integer, got 0" in str(zero.value)
    interleaved = {**RUNNING_175B, "virtual": 2}
    with pytest.raises(PlanRequestError) as above:
        build_request(PK, model=GPT3_175B, cluster=P5_1024, current=interleaved, max_virtual=1)
    assert _fields(above) == {"current.virtual"}
    assert "runs 2 chunks per GPU, above its max_virtual 1" in str(above.value)


def test_request_planning_stores_max_virtual_and_a_later_report_above_it_stays_planned(dynamodb: Any) -> None:
    # Given a job registered from inside with max_virtual 1 (spelled as a string, as from a YAML file)
    limit: Any = "1"
    osprey.request_planning(
        GPT3_175B, P5_1024, RUNNING_175B, max_virtual=limit, client=dynamodb, environ=_env()
    )
    item = _stored(dynamodb)
    assert item is not None
    # Then the limit is stored as the integer it was checked as
    assert json.loads(item["config"]["S"])["max-virtual"] == 1
    # When the job later reports running an interleaved plan anyway (chosen by hand)
    report_plan_progress(700, {**RUNNING_175B, "virtual": 2}, client=dynamodb, environ=_env())
    # Then its request still reads back, so the plan step keeps planning it
    request = request_from_item(_stored(dynamodb) or {})
    assert (request.current.virtual, request.options.max_virtual) == (2, 1)
