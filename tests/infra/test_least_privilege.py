"""Given the synthesized control plane with every backend and an EKS cluster, when its IAM policies are read,
then each function holds only the DynamoDB actions its code calls (the lease and finish functions only on the
lease item), AddTags is limited to the tag Osprey writes, and SageMaker and ECS reads name resource ARNs; and
when a cycle and two ingested events run against the deployed template, then no function makes a DynamoDB call
its role was not granted."""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aws_cdk as cdk
import botocore.client
import pytest
from aws_cdk.assertions import Template

from osprey.local.lambdas import import_handler
from osprey_control.registry.dynamodb import JobRegistry
from osprey_infra.config import ControlPlaneConfig
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT
from tests.infra.e2e.fleet import Fleet
from tests.infra.e2e.harness import CycleHarness, deployed, synthesized_template
from tests.infra.iam import DynamoCall, actions, allowed, function_statements, resource_kind, resources

# What no Osprey function calls: the writes that could delete the lease or a job, and the stream reads.
# (DeleteItem is granted to the apply function on its share-ledger items only: see the test below.)
NEVER = {
    "dynamodb:Scan",
    "dynamodb:BatchWriteItem",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:DescribeStream",
    "dynamodb:DescribeTable",
    "dynamodb:PartiQLDelete",
}
LEASE_KEY = "LEASE#cycle"
SHARES_KEY = "SHARES#batch"
WRITES_KEY = "WRITES#cycle"


@pytest.fixture(scope="module")
def statements() -> dict[str, list[dict[str, Any]]]:
    stack = OspreyStack(
        cdk.App(),
        "Test",
        policy_paths=[REPO_ROOT / "policies"],
        config=ControlPlaneConfig.build({"eks_clusters": ["gpu-a"]}),
    )
    return function_statements(Template.from_stack(stack).to_json())


def _dynamodb(statements: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Each granted DynamoDB action and the table resources (``table``, ``index/<name>``) it is granted on."""
    granted: dict[str, set[str]] = {}
    for statement in statements:
        for action in actions(statement):
            if action.startswith("dynamodb:"):
                granted.setdefault(action, set()).update(resource_kind(r) for r in resources(statement))
    return granted


def test_each_function_holds_exactly_the_dynamodb_actions_its_code_calls(
    statements: dict[str, list[dict[str, Any]]],
) -> None:
    # Given each function's role
    granted = {module: _dynamodb(found) for module, found in statements.items()}
    # Then it holds the calls of the modules its handler uses, on the table or the index it queries ...
    get, put, update = "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"
    query, check = "dynamodb:Query", "dynamodb:ConditionCheckItem"
    table, active, pending = {"table"}, {"index/active-jobs"}, {"index/apply-pending"}
    assert granted == {
        "ingest": {get: table, put: table, update: table, query: table},
        "lease": {update: table},
        "finish": {update: table},
        "shards": {query: active},
        "collect": {put: table, query: active},
        "derive": {get: table, put: table, check: table, query: active},
        "apply": {
            get: table,
            put: table,
            check: table,
            "dynamodb:BatchGetItem": table,
            query: pending | active | table,
            "dynamodb:DeleteItem": table,
        },
        "eks_discovery": {get: table, put: table, query: active},  # query: reconciliation (list_active)
        "gang_watch": {get: table, put: table},
        "plan": {"dynamodb:BatchGetItem": table, put: table, update: table, check: table, query: active},
    }
    # ... so none of them may scan, batch-write or read the stream
    assert not any(NEVER & set(found) for found in granted.values())


def test_only_the_apply_function_deletes_and_only_its_share_ledger_items(
    statements: dict[str, list[dict[str, Any]]],
) -> None:
    # Given every function's statements that grant DeleteItem or a Query on the table itself
    deleting = {
        module: [s for s in found if "dynamodb:DeleteItem" in actions(s)]
        for module, found in statements.items()
    }
    # Then only apply holds DeleteItem, and only under the share ledger's and the write intents' partition keys
    assert {module for module, found in deleting.items() if found} == {"apply"}
    for statement in deleting["apply"]:
        assert statement["Condition"] == {
            "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [SHARES_KEY, WRITES_KEY]}
        }
        assert "dynamodb:Query" in actions(statement)


@pytest.mark.parametrize("module", ["lease", "finish"])
def test_the_lease_and_finish_functions_may_touch_only_the_lease_item(
    statements: dict[str, list[dict[str, Any]]], module: str
) -> None:
    # Given the function's DynamoDB statements
    table = [s for s in statements[module] if any(a.startswith("dynamodb:") for a in actions(s))]
    # Then every one is conditioned on the lease's partition key, so neither can write a job or another item
    assert table
    for statement in table:
        assert statement["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [LEASE_KEY]}}


def test_add_tags_may_write_only_the_derived_priority_tag_on_opted_in_training_jobs(
    statements: dict[str, list[dict[str, Any]]],
) -> None:
    # Given the only statements in any role that allow AddTags
    tagging = {
        module: [s for s in found if "sagemaker:AddTags" in actions(s)]
        for module, found in statements.items()
    }
    assert {module for module, found in tagging.items() if found} == {"apply"}
    (statement,) = tagging["apply"]
    # Then it names only Osprey's own tag key (never osprey:enabled or a cost tag), on opted-in jobs
    assert statement["Condition"] == {
        "StringEquals": {"aws:ResourceTag/osprey:enabled": "true"},
        "ForAllValues:StringEquals": {"aws:TagKeys": ["osprey:derived-priority"]},
        "Null": {"aws:TagKeys": "false"},
    }
    assert json.dumps(statement["Resource"]).endswith(':training-job/*"]]}')


# Actions without resource-level permissions (the only ones a statement may grant on "*").
NO_RESOURCE_LEVEL = {
    "batch:DescribeJobs",
    "batch:DescribeServiceJob",
    "batch:DescribeJobQueues",
    "batch:DescribeSchedulingPolicies",
    "cloudwatch:GetMetricData",
}


def test_sagemaker_and_ecs_reads_name_resource_arns_and_only_batch_describes_use_a_wildcard(
    statements: dict[str, list[dict[str, Any]]],
) -> None:
    scoped = {
        "sagemaker:DescribeTrainingJob": ":training-job/*",
        "sagemaker:ListTags": ":training-job/*",
        "ecs:DescribeContainerInstances": ":container-instance/*",
    }
    seen: set[str] = set()
    for module, found in statements.items():
        for statement in found:
            # Then no statement grants anything on "*" but actions that cannot name a resource ...
            if "*" in resources(statement):
                assert actions(statement) <= NO_RESOURCE_LEVEL, (module, statement)
            # ... and the SageMaker and ECS reads name their resource type
            for action in actions(statement) & set(scoped):
                seen.add(action)
                assert all(scoped[action] in json.dumps(r) for r in resources(statement)), (module, statement)
    assert seen == set(scoped)


# -- the calls a deployed cycle really makes ---------------------------------------------------------------

_function: contextvars.ContextVar[str | None] = contextvars.ContextVar("osprey_function", default=None)
_TRANSACT = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


def _pk(item: dict[str, Any] | None) -> str | None:
    value = (item or {}).get("pk", {})
    return value.get("S") if isinstance(value, dict) else None


def iam_checks(operation: str, params: dict[str, Any]) -> list[DynamoCall]:
    """The IAM checks DynamoDB makes for one request (a transaction checks each of its items)."""
    if operation == "TransactWriteItems":
        return [
            DynamoCall(_TRANSACT[kind], "table", _pk(body.get("Key") or body.get("Item")))
            for entry in params["TransactItems"]
            for kind, body in entry.items()
        ]
    if operation == "Query":
        index = params.get("IndexName")
        if index:
            return [DynamoCall("dynamodb:Query", f"index/{index}")]
        # A table Query's LeadingKeys is the partition key value its key condition names.
        found = re.search(r"\bpk = (:\w+)", params.get("KeyConditionExpression", ""))
        value = params.get("ExpressionAttributeValues", {}).get(found.group(1)) if found else None
        return [DynamoCall("dynamodb:Query", "table", value["S"] if value else None)]
    return [DynamoCall(f"dynamodb:{operation}", "table", _pk(params.get("Key") or params.get("Item")))]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, DynamoCall]]:
    """Every DynamoDB request a function makes, as (handler module, IAM check)."""
    calls: list[tuple[str, DynamoCall]] = []
    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

    def record(client: Any, operation: str, params: dict[str, Any]) -> Any:
        module = _function.get()
        if module is not None and client.meta.service_model.service_name == "dynamodb":
            calls.extend((module, check) for check in iam_checks(operation, params))
        return original(client, operation, params)

    submit = ThreadPoolExecutor.submit

    def submit_in_context(
        pool: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Any:
        # A function's worker threads (derive's) make its calls too: they run in the caller's context.
        return submit(pool, contextvars.copy_context().run, fn, *args, **kwargs)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", record)
    monkeypatch.setattr(ThreadPoolExecutor, "submit", submit_in_context)
    return calls


def _attribute(cycle: CycleHarness) -> None:
    """Run every deployed function's real handler under its module's name."""
    for physical in cycle.deployment.of_type("AWS::Lambda::Function").values():
        spec = str(physical.attributes["Handler"])
        handler, module = import_handler(spec), spec.split(".")[1]

        def attributed(event: Any, context: Any, handler: Any = handler, module: str = module) -> Any:
            token = _function.set(module)
            try:
                return handler(event, context)
            finally:
                _function.reset(token)

        cycle.runtime.overrides[physical.ref] = attributed


def _sqs(*events: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"m{number}",
                "receiptHandle": f"r{number}",
                "body": json.dumps(event),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:osprey-ingest",
                "awsRegion": "us-east-1",
            }
            for number, event in enumerate(events)
        ]
    }


def _events() -> list[dict[str, Any]]:
    batch = json.loads((REPO_ROOT / "tests" / "events" / "batch_job_state_change.json").read_text())
    batch["detail"]["container"].pop("containerInstanceArn")  # no ECS cluster in this moto
    spot = json.loads(
        (REPO_ROOT / "tests" / "events" / "ec2_spot_instance_interruption_warning.json").read_text()
    )
    return [batch, spot]


def test_a_deployed_cycle_and_ingest_make_no_dynamodb_call_their_role_was_not_granted(
    monkeypatch: pytest.MonkeyPatch, recorded: list[tuple[str, DynamoCall]]
) -> None:
    # Given the real app's template deployed in moto, with jobs of every AWS backend in the registry
    template = synthesized_template()
    granted = function_statements(template)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with deployed(template) as cycle:
        table = cycle.deployment_table()
        registry = JobRegistry(table, client=cycle.client("dynamodb"), shards=16)
        fleet = Fleet(registry, cycle.client("batch"), cycle.client("cloudwatch"), cycle.service_jobs)
        fleet.create_queues(cycle.client("iam"))
        fleet.batch_job("busy", gpu=90, memory_bandwidth=60)
        fleet.queued_sagemaker_job("bert", gpu=52)
        fleet.direct_sagemaker_job(cycle.client("sagemaker"), "gpt", gpu=40)
        _attribute(cycle)

        # When a Batch job's event and a spot warning are ingested, and a cycle runs
        ingested = cycle.client("lambda").invoke(
            FunctionName=cycle.function("ingest"), Payload=json.dumps(_sqs(*_events())).encode()
        )
        assert json.loads(ingested["Payload"].read()) == {"batchItemFailures": []}
        execution = cycle.run("cycle-1")
        assert execution.status == "SUCCEEDED", execution

    # Then every function the cycle runs made DynamoDB calls, and each was within its role's grants
    modules = {module for module, _ in recorded}
    assert {"ingest", "lease", "shards", "collect", "derive", "apply", "plan", "finish"} <= modules
    refused = sorted(
        {(module, call) for module, call in recorded if not allowed(call, granted[module])}, key=str
    )
    assert refused == []
    # ... including the lease's own writes, on the lease item
    assert ("lease", DynamoCall("dynamodb:UpdateItem", "table", LEASE_KEY)) in recorded
