"""One cycle of the real cycle state machine over a large fleet, in moto: the bytes each state carries.

Run: ``.venv/bin/python bench/scale_bench.py`` (options: ``--jobs`` 10000, ``--gpus`` 2048, ``--cycles`` 1).

What runs: the synthesized app (``infra/app.py``) deployed into moto (:func:`osprey.local.deploy.deploy_template`),
and its cycle state machine executed by moto's Step Functions interpreter with every Lambda's real handler
in-process (:class:`osprey.local.lambdas.InProcessLambdas`), as in ``tests/infra/test_cycle_e2e.py``. Nothing of
the data path is re-composed: the sizes are those of the execution history's state inputs and outputs (compact
JSON, as Step Functions counts them). The cycle is an Express workflow, whose history AWS keeps only in its log
group; moto answers DescribeExecution and GetExecutionHistory for it, which is what the bench reads.

The fleet: ``--gpus`` / 8 EC2 instances of 8 GPUs, each running one AWS Batch job (fair-share queue, its own
share) and publishing the CloudWatch agent's GPU series; the other jobs are queued (PENDING, no nodes, no
series). The registry is seeded in the steady state a fleet reaches after its first cycles: every job derived
and applied at 50, the queued ones last derived for want of data. Running jobs then move (damped) every cycle
and are written and applied; queued jobs change nothing and are not written (docs/registry.md, only on
change). ``--cycles`` executions run one after the other; the last one is measured.

Two concessions to moto, neither on Osprey's data path: moto's TransactWriteItems deep-copies the whole table
for its rollback (O(J) per decision: at 10,000 jobs one cycle took over 15 GB and ran past the derive
function's deadline), so the bench makes that copy a no-op (``--exact-moto`` keeps it; the bench has a single
writer under the lease, so no transaction is cancelled and nothing is rolled back); and the registry is seeded
with direct PutItems in the steady state (a first cycle writes every job).

Last line: ``jobs=<J> gpus=<G> max_state_bytes=<B> getmetricdata_calls=<C> series=<S> dynamodb_writes=<W>
state_transitions=<T> lambda_invocations=<L>`` (``dynamodb_writes``: items written, a TransactWriteItems
counting its items; ``state_transitions``: states entered, what a Standard workflow would bill; the Express
cycle bills requests and duration instead). The line before it gives the largest input/output per state.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
REGION = "us-east-1"
GPUS_PER_NODE = 8
MOTO_CONFIG: Any = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
    "batch": {"use_docker": False},
}
_WRITES = {"PutItem": 1, "UpdateItem": 1, "DeleteItem": 1}


class ApiCalls:
    """Every AWS request made in this process (a botocore handler installed before any client exists)."""

    def __init__(self) -> None:
        self.operations: Counter[str] = Counter()
        self.dynamodb_writes = 0

    def __call__(self, model: Any, params: Mapping[str, Any], **_: Any) -> None:
        name = model.name
        self.operations[name] += 1
        if model.service_model.service_name != "dynamodb":
            return
        if name == "TransactWriteItems":
            self.dynamodb_writes += len(params.get("TransactItems", ()))
        elif name == "BatchWriteItem":
            self.dynamodb_writes += sum(len(items) for items in params.get("RequestItems", {}).values())
        else:
            self.dynamodb_writes += _WRITES.get(name, 0)

    def reset(self) -> None:
        self.operations.clear()
        self.dynamodb_writes = 0


@contextmanager
def _table_copy_skipped() -> Iterator[None]:
    """moto's transaction rollback copy of a Table returns the Table itself while the block runs."""
    from moto.dynamodb.models.table import Table  # noqa: PLC0415 - moto is a dev dependency

    original = Table.__dict__.get("__deepcopy__")
    Table.__deepcopy__ = lambda self, memo: self  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if original is None:
            del Table.__deepcopy__  # type: ignore[attr-defined]
        else:
            Table.__deepcopy__ = original  # type: ignore[attr-defined]


def state_bytes(events: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The largest input or output (UTF-8 bytes of the history's JSON) of each state of an execution."""
    sizes: dict[str, int] = {}
    for event in events:
        for key, field in (("stateEnteredEventDetails", "input"), ("stateExitedEventDetails", "output")):
            details = event.get(key)
            if details and isinstance(details.get(field), str):
                size = len(details[field].encode())
                sizes[details["name"]] = max(sizes.get(details["name"], 0), size)
    return sizes


def _seed(
    clients: Mapping[str, Any], table: str, shards: int, *, jobs: int, nodes: int, now: datetime
) -> None:
    """The steady-state registry (direct PutItems: see the module docstring), Batch jobs and GPU series."""
    from bench.cycle_bench import fair_share_queue  # noqa: PLC0415 - after main() put the repository on sys.path
    from osprey_control.contract import parse_block  # noqa: PLC0415 - imported inside moto's context
    from osprey_control.registry import (  # noqa: PLC0415
        Backend,
        JobRecord,
        JobStatus,
        NodeKind,
        NodeRef,
        record_to_item,
    )

    queue = fair_share_queue(clients)
    block = parse_block({"priority_derivation_profile": "training-policy"})
    waiting: dict[str, Any] = {
        "priority": 50,
        "previous": 50,
        "target": None,
        "base": None,
        "reason": "no-data",
        "rules": [],
    }
    for index in range(jobs):
        running = index < nodes
        share = f"osprey-job-{index:05d}"
        if running:
            native_id = clients["batch"].submit_job(
                jobName=f"job-{index:05d}",
                jobQueue=queue,
                jobDefinition="train",
                shareIdentifier=share,
                tags={"osprey:enabled": "true"},
            )["jobId"]
            instance = f"i-{index:017x}"
            level = 10.0 + 85.0 * index / max(nodes - 1, 1)
            dims = [{"Name": "InstanceId", "Value": instance}]
            clients["cloudwatch"].put_metric_data(
                Namespace="CWAgent",
                MetricData=[
                    {
                        "MetricName": name,
                        "Dimensions": dims,
                        "Value": value,
                        "Timestamp": now - timedelta(minutes=1),
                    }
                    for name, value in (
                        ("nvidia_smi_utilization_gpu", level),
                        ("nvidia_smi_utilization_memory", level * 0.7),
                        ("nvidia_smi_memory_used", 40000.0),
                        ("nvidia_smi_memory_total", 81920.0),
                    )
                ],
            )
        else:
            native_id = f"queued-{index:05d}"
        record = JobRecord(
            backend=Backend.BATCH,
            native_id=native_id,
            name=f"job-{index:05d}",
            block=block,
            status=JobStatus.RUNNING if running else JobStatus.PENDING,
            status_time=now - timedelta(minutes=30),
            submitted_at=now - timedelta(minutes=40),
            nodes=(NodeRef(node_id=instance, kind=NodeKind.INSTANCE, instance_id=instance, gpus=8),)
            if running
            else (),
            job_queue=queue,
            share_identifier=share,
            tags={"osprey:enabled": "true"},
            derived_priority=50,
            applied_priority=50,
            applied_at=now - timedelta(minutes=1),
            last_decision=None if running else waiting,
            version=1,
        )
        clients["dynamodb"].put_item(TableName=table, Item=record_to_item(record, shards=shards))


def _client(service: str) -> Any:
    import boto3  # noqa: PLC0415 - after main() set the environment

    return boto3.client(service, region_name=REGION)  # type: ignore[call-overload]


def _history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        events.extend(page["events"])
        if not page.get("nextToken"):
            return events
        kwargs["nextToken"] = page["nextToken"]


def _run(sfn: Any, machine: str, name: str, timeout: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    arn = sfn.start_execution(stateMachineArn=machine, name=name, input="{}")["executionArn"]
    deadline = time.monotonic() + timeout
    while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
        if time.monotonic() > deadline:
            raise TimeoutError(f"execution {name} still RUNNING after {timeout} s")
        time.sleep(0.2)
    if described["status"] != "SUCCEEDED":
        raise RuntimeError(f"execution {name} ended {described['status']}: {described.get('error')}")
    return json.loads(described.get("output") or "{}"), _history(sfn, arn)


def _report(
    output: Mapping[str, Any],
    events: list[dict[str, Any]],
    calls: ApiCalls,
    *,
    jobs: int,
    nodes: int,
    invocations: int,
) -> None:
    """The measured execution: what it applied, its GetMetricData calls, each state's bytes, the result line."""
    sizes = state_bytes(events)
    reports = [report for report in output.get("shards", []) if isinstance(report, dict)]
    collected = output.get("collect") or {}
    # The collect step reads for every shard; a shard reads only what it lacked (none in a steady cycle).
    series = int(collected.get("series", 0)) + sum(int(report.get("series", 0)) for report in reports)
    reported_calls = int(collected.get("getmetricdata_calls", 0)) + sum(
        int(report.get("getmetricdata_calls", 0)) for report in reports
    )
    transitions = sum(1 for event in events if event["type"].endswith("StateEntered"))
    print(f"collect: {json.dumps(collected)}")
    print(f"apply: {json.dumps(output.get('apply'))}")
    print(f"requests: {dict(sorted(calls.operations.items()))}")
    print(
        f"getmetricdata: {calls.operations['GetMetricData']} calls (reported {reported_calls}); "
        f"ceil(series/500) = {math.ceil(series / 500)}"
    )
    print("state bytes: " + " ".join(f"{name}={size}" for name, size in sorted(sizes.items())))
    print(
        f"jobs={jobs} gpus={nodes * GPUS_PER_NODE} max_state_bytes={max(sizes.values(), default=0)} "
        f"getmetricdata_calls={calls.operations['GetMetricData']} series={series} "
        f"dynamodb_writes={calls.dynamodb_writes} state_transitions={transitions} lambda_invocations={invocations}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One cycle of the real state machine over a large fleet.")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--gpus", type=int, default=2_048)
    parser.add_argument("--cycles", type=int, default=1, help="executions run; the last one is measured")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per execution")
    parser.add_argument(
        "--exact-moto", action="store_true", help="keep moto's whole-table transaction copies"
    )
    args = parser.parse_args(argv)
    nodes = min(args.jobs, max(1, args.gpus // GPUS_PER_NODE))
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": REGION,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }.items():
        os.environ.setdefault(name, value)
    for path in ("infra", "lambdas", "."):  # "." for bench.cycle_bench when run as a script
        if str((REPO_ROOT / path).resolve()) not in sys.path:
            sys.path.insert(0, str((REPO_ROOT / path).resolve()))

    from botocore.handlers import BUILTIN_HANDLERS  # noqa: PLC0415
    from moto import mock_aws  # noqa: PLC0415

    from app import build_app  # noqa: PLC0415 - infra/app.py
    from osprey.local.deploy import deploy_template  # noqa: PLC0415
    from osprey.local.lambdas import InProcessLambdas  # noqa: PLC0415
    from osprey.local.serial import serialized_moto  # noqa: PLC0415

    template = build_app().synth().get_stack_by_name("Osprey").template
    calls = ApiCalls()
    BUILTIN_HANDLERS.append(("before-parameter-build.*.*", calls))  # every client created from now on
    try:
        with mock_aws(config=MOTO_CONFIG):
            deployment = deploy_template(template, _client)
            runtime = InProcessLambdas()
            copies = nullcontext() if args.exact_moto else _table_copy_skipped()
            with serialized_moto(), runtime.installed(), copies:
                names = ("dynamodb", "cloudwatch", "batch", "iam", "lambda", "stepfunctions")
                clients = {name: _client(name) for name in names}
                derive = deployment.function_by_handler("osprey_handlers.derive.handler")
                variables = clients["lambda"].get_function_configuration(FunctionName=derive)["Environment"]
                table = variables["Variables"]["OSPREY_TABLE_NAME"]
                shards = int(variables["Variables"]["OSPREY_REGISTRY_SHARDS"])
                started = time.perf_counter()
                _seed(clients, table, shards, jobs=args.jobs, nodes=nodes, now=datetime.now(UTC))
                seeded = time.perf_counter()
                for cycle in range(1, args.cycles + 1):
                    calls.reset()
                    runtime.invocations.clear()
                    cycle_started = time.perf_counter()
                    output, events = _run(
                        clients["stepfunctions"],
                        deployment.state_machine_arn(),
                        f"bench-{cycle}",
                        args.timeout,
                    )
                    seconds = time.perf_counter() - cycle_started
                invocations = len(runtime.invocations)
    finally:
        BUILTIN_HANDLERS.remove(("before-parameter-build.*.*", calls))

    print(
        f"fleet: {args.jobs} jobs ({nodes} running on {nodes} nodes x {GPUS_PER_NODE} GPUs), {shards} shards"
    )
    print(f"seeded in {seeded - started:.1f} s; cycle {args.cycles} (measured) took {seconds:.1f} s in moto")
    _report(output, events, calls, jobs=args.jobs, nodes=nodes, invocations=invocations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
