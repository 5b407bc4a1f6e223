"""One full cycle pass (collect → derive → record → apply) over a moto-mocked fleet, plus handler cold imports.

Run: ``.venv/bin/python bench/cycle_bench.py`` (options: ``--jobs``, ``--nodes``).

The fleet: ``--nodes`` EC2 instances of 8 GPUs (the CloudWatch agent's per-instance rollup) shared out over
``--jobs`` AWS Batch jobs, every instance publishing GPU, memory-bandwidth, memory used/total and the runtime's
interconnect latency. Everything runs in-process against moto, so absolute times measure Osprey plus moto; the
baseline measured in the same run is the same number of bare moto GetMetricData calls, which puts Osprey's
own overhead as a ratio. Cold imports run each handler module in a fresh interpreter against ``import json``.

Last line: ``jobs=<J> series=<S> getmetricdata_calls=<C> writes=<W> seconds=<T>``.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from functools import wraps
from pathlib import Path
from typing import Any
from unittest import mock

REPO_ROOT = Path(__file__).resolve().parent.parent
HANDLERS = ("osprey_handlers.ingest", "osprey_handlers.derive", "osprey_handlers.eks_discovery")
NOW = datetime.now(UTC).replace(microsecond=0)


def _cold_import_ms(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print((time.perf_counter() - t) * 1000)"
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO_ROOT / 'lambdas'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    runs = []
    for _ in range(3):
        output = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        runs.append(float(output.stdout.strip().splitlines()[-1]))
    return min(runs)


@contextmanager
def _serialised_moto_dynamodb() -> Iterator[None]:
    """moto's DynamoDB is not thread-safe (TransactWriteItems deep-copies the table unlocked) and the derive step
    writes from a thread pool, so a concurrent write can fail a job with "dictionary changed size during
    iteration". Same fix as tests/control/moto_threads.py: every backend method under one re-entrant lock."""
    from moto.dynamodb.models import DynamoDBBackend  # noqa: PLC0415 - moto only once the bench runs

    lock = threading.RLock()

    def locked(function: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return function(*args, **kwargs)

        return call

    with ExitStack() as stack:
        for name, function in vars(DynamoDBBackend).items():
            if not name.startswith("_") and inspect.isfunction(function):
                stack.enter_context(mock.patch.object(DynamoDBBackend, name, locked(function)))
        yield


def _seed(clients: dict[str, Any], jobs: int, nodes: int, registry: Any) -> list[str]:
    from osprey_control.contract import parse_block  # noqa: PLC0415 - imported inside moto's context
    from osprey_control.policy import load_policies  # noqa: PLC0415
    from osprey_control.registry import Backend, JobStatus, NodeKind, NodeRef  # noqa: PLC0415
    from osprey_control.registry.observation import JobObservation  # noqa: PLC0415
    from osprey_infra.policy_store import policy_parameter_value  # noqa: PLC0415

    for policy in load_policies([REPO_ROOT / "policies"]):
        clients["ssm"].put_parameter(
            Name=f"/osprey/policies/{policy.name}", Value=policy_parameter_value(policy), Type="String"
        )
    rng = random.Random(11)
    instances = [f"i-{index:017x}" for index in range(nodes)]
    per_job = [instances[i::jobs] for i in range(jobs)]
    block = parse_block({"priority_derivation_profile": "training-policy"})
    for index, assigned in enumerate(per_job):
        registry.apply_observation(
            JobObservation(
                backend=Backend.BATCH,
                native_id=f"job-{index:04d}",
                name=f"job-{index:04d}",
                block=block,
                status=JobStatus.RUNNING,
                event_time=NOW - timedelta(minutes=30),
                submitted_at=NOW - timedelta(minutes=40),
                nodes=tuple(
                    NodeRef(node_id=i, kind=NodeKind.INSTANCE, instance_id=i, gpus=8) for i in assigned
                ),
            )
        )
        level = rng.uniform(5, 99)
        for instance in assigned:
            dims = [{"Name": "InstanceId", "Value": instance}]
            stamp = NOW - timedelta(minutes=1)
            data = [
                ("nvidia_smi_utilization_gpu", level),
                ("nvidia_smi_utilization_memory", level * 0.7),
                ("nvidia_smi_memory_used", 40000.0),
                ("nvidia_smi_memory_total", 81920.0),
            ]
            clients["cloudwatch"].put_metric_data(
                Namespace="CWAgent",
                MetricData=[
                    {"MetricName": n, "Dimensions": dims, "Value": v, "Timestamp": stamp} for n, v in data
                ],
            )
    return instances


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One Osprey cycle over a moto-mocked fleet.")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=256)
    parser.add_argument("--skip-imports", action="store_true", help="skip the cold import measurements")
    args = parser.parse_args(argv)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
    }.items():
        os.environ.setdefault(name, value)
    sys.path.insert(0, str(REPO_ROOT / "infra"))
    sys.path.insert(0, str(REPO_ROOT / "lambdas"))

    import boto3  # noqa: PLC0415
    from moto import mock_aws  # noqa: PLC0415

    from osprey_control.cycle import run_shard  # noqa: PLC0415
    from osprey_control.derive import PolicySource  # noqa: PLC0415
    from osprey_control.registry.dynamodb import JobRegistry  # noqa: PLC0415

    with mock_aws(), _serialised_moto_dynamodb():
        clients: dict[str, Any] = {name: boto3.client(name) for name in ("dynamodb", "ssm", "cloudwatch")}
        registry = JobRegistry("osprey-bench", client=clients["dynamodb"], shards=4)
        registry.create_table()
        _seed(clients, args.jobs, args.nodes, registry)
        calls = {"GetMetricData": 0, "writes": 0}

        def count(event_name: str, **_: Any) -> None:
            operation = event_name.rsplit(".", 1)[-1]
            if operation == "GetMetricData":
                calls["GetMetricData"] += 1
            elif operation in {"TransactWriteItems", "PutItem", "UpdateItem", "UpdateSchedulingPolicy"}:
                calls["writes"] += 1

        for client in clients.values():
            client.meta.events.register("before-call.*.*", count)
        started = time.perf_counter()
        report = run_shard(
            registry, PolicySource(client=clients["ssm"]), None, cloudwatch=clients["cloudwatch"], now=NOW
        )
        seconds = time.perf_counter() - started

        # Baseline: the same number of bare GetMetricData calls of the same size, straight to moto.
        query = [
            {
                "Id": f"q{i}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "CWAgent",
                        "MetricName": "nvidia_smi_utilization_gpu",
                        "Dimensions": [{"Name": "InstanceId", "Value": f"i-{i % args.nodes:017x}"}],
                    },
                    "Period": 60,
                    "Stat": "Average",
                },
            }
            for i in range(min(500, report.series))
        ]
        baseline_started = time.perf_counter()
        for _ in range(report.getmetricdata_calls):
            clients["cloudwatch"].get_metric_data(
                MetricDataQueries=query, StartTime=NOW - timedelta(minutes=5), EndTime=NOW
            )
        baseline = time.perf_counter() - baseline_started

    expected_calls = math.ceil(report.series / 500)
    print(
        f"fleet: {args.jobs} jobs on {args.nodes} nodes x 8 GPUs; derived {report.evaluated}, changed {len(report.changes)}"
    )
    print(
        f"series={report.series} getmetricdata_calls={report.getmetricdata_calls} (ceil(S/500) = {expected_calls})"
    )
    print(
        f"cycle: {seconds:.3f} s; bare GetMetricData baseline {baseline:.3f} s; ratio {seconds / baseline:.2f}x"
    )
    for failure in report.failures:
        print(f"failed {failure['key']} ({failure['kind']}): {failure['error']}")
    if not args.skip_imports:
        reference = _cold_import_ms("json")
        for module in HANDLERS:
            elapsed = _cold_import_ms(module)
            print(
                f"cold import {module}: {elapsed:.0f} ms (target < 300 ms; {elapsed / max(reference, 0.01):.0f}x `import json`)"
            )
    print(
        f"jobs={report.evaluated} series={report.series} getmetricdata_calls={report.getmetricdata_calls} "
        f"writes={calls['writes']} seconds={seconds:.3f}"
    )
    return 0 if report.getmetricdata_calls == expected_calls and not report.failures else 1


if __name__ == "__main__":
    sys.exit(main())
