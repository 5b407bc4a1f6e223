"""One full cycle pass (collect → derive → record → apply → record) over a moto-mocked fleet.

Run: ``.venv/bin/python bench/cycle_bench.py`` (options: ``--jobs``, ``--nodes``).

The fleet: ``--nodes`` EC2 instances of 8 GPUs (the CloudWatch agent's per-instance rollup) shared out over
``--jobs`` AWS Batch container jobs on one fair-share queue (each with its own share identifier, tagged
``osprey:enabled``), every instance publishing GPU, memory-bandwidth and memory used/total (no runtime series:
the jobs' lead latency is queried and found missing, as for a job that does not report it). The pass is the
cycle's, as run in-process without the state machine: each shard's derive step (GetMetricData, the engine, one
conditional decision write per job), then the apply step (DescribeJobs, DescribeJobQueues, one
UpdateSchedulingPolicy for the queue, one conditional registry write per job recording what was applied).
Everything runs in-process against moto, so absolute times measure Osprey plus moto; the baseline measured in
the same run is the same number of bare moto GetMetricData calls, which puts Osprey's own overhead as a ratio.
Handler cold imports: ``bench/cold_start.py``.

Last line: ``jobs=<J> series=<S> getmetricdata_calls=<C> writes=<W> seconds=<T>`` (``writes``: every write
call of the pass: TransactWriteItems, PutItem, UpdateItem, UpdateSchedulingPolicy, UpdateServiceJob, AddTags).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
WRITE_OPERATIONS = frozenset(
    {"TransactWriteItems", "PutItem", "UpdateItem", "UpdateSchedulingPolicy", "UpdateServiceJob", "AddTags"}
)
MOTO_CONFIG: Any = {"batch": {"use_docker": False}}  # Batch jobs need no container: the bench only tags them
NOW = datetime.now(UTC).replace(microsecond=0)


def fair_share_queue(clients: Mapping[str, Any]) -> str:
    """An unmanaged compute environment, a fair-share scheduling policy and its queue, a job definition
    (also what ``bench/scale_bench.py`` seeds)."""
    role = clients["iam"].create_role(RoleName="batch-service", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    environment = clients["batch"].create_compute_environment(
        computeEnvironmentName="gpu", type="UNMANAGED", state="ENABLED", serviceRole=role
    )["computeEnvironmentArn"]
    policy = clients["batch"].create_scheduling_policy(
        name="osprey-fair-share",
        fairsharePolicy={"shareDecaySeconds": 3600, "shareDistribution": []},
        tags={"osprey:enabled": "true"},
    )["arn"]
    queue: str = clients["batch"].create_job_queue(
        jobQueueName="osprey-gpu",
        state="ENABLED",
        priority=1,
        schedulingPolicyArn=policy,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": environment}],
    )["jobQueueArn"]
    clients["batch"].register_job_definition(
        jobDefinitionName="train",
        type="container",
        containerProperties={"image": "train:1", "vcpus": 1, "memory": 512},
    )
    return queue


def _seed(clients: dict[str, Any], jobs: int, nodes: int, registry: Any) -> list[str]:
    from osprey_control.contract import parse_block  # noqa: PLC0415 - imported inside moto's context
    from osprey_control.policy import (  # noqa: PLC0415
        load_policies,
        policy_parameter_value,
    )
    from osprey_control.registry import (  # noqa: PLC0415
        Backend,
        JobObservation,
        JobStatus,
        NodeKind,
        NodeRef,
    )

    for policy in load_policies([REPO_ROOT / "policies"]):
        clients["ssm"].put_parameter(
            Name=f"/osprey/policies/{policy.name}", Value=policy_parameter_value(policy), Type="String"
        )
    rng = random.Random(11)
    instances = [f"i-{index:017x}" for index in range(nodes)]
    per_job = [instances[i::jobs] for i in range(jobs)]
    block = parse_block({"priority_derivation_profile": "training-policy"})
    queue = fair_share_queue(clients)
    for index, assigned in enumerate(per_job):
        name, share = f"job-{index:04d}", f"osprey-job-{index:04d}"
        job_id = clients["batch"].submit_job(
            jobName=name,
            jobQueue=queue,
            jobDefinition="train",
            shareIdentifier=share,
            tags={"osprey:enabled": "true"},
        )["jobId"]
        registry.apply_observation(
            JobObservation(
                backend=Backend.BATCH,
                native_id=job_id,
                name=name,
                job_queue=queue,
                share_identifier=share,
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
    args = parser.parse_args(argv)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }.items():
        os.environ.setdefault(name, value)
    sys.path.insert(0, str(REPO_ROOT / "infra"))
    sys.path.insert(0, str(REPO_ROOT / "lambdas"))

    import boto3  # noqa: PLC0415
    from moto import mock_aws  # noqa: PLC0415

    from osprey.local.serial import serialized_moto  # noqa: PLC0415
    from osprey_control.backends.batch import BatchShareApplier  # noqa: PLC0415
    from osprey_control.policy_store import PolicySource  # noqa: PLC0415
    from osprey_control.registry import JobRegistry  # noqa: PLC0415
    from osprey_control.steps.apply import apply_cycle  # noqa: PLC0415
    from osprey_control.steps.derive import derive_within  # noqa: PLC0415

    # moto's DynamoDB is not thread-safe (TransactWriteItems deep-copies a table unlocked) and the derive step
    # writes from a thread pool: serialise moto's dispatch, as the tests and `osprey local` do.
    with mock_aws(config=MOTO_CONFIG), serialized_moto():
        names: tuple[Any, ...] = ("dynamodb", "ssm", "cloudwatch", "batch", "iam")
        clients: dict[str, Any] = {name: boto3.client(name) for name in names}
        registry = JobRegistry("osprey-bench", client=clients["dynamodb"], shards=4)
        registry.create_table()
        _seed(clients, args.jobs, args.nodes, registry)
        calls: dict[str, int] = {}

        def count(event_name: str, **_: Any) -> None:
            operation = event_name.rsplit(".", 1)[-1]
            calls[operation] = calls.get(operation, 0) + 1

        for client in clients.values():
            client.meta.events.register("before-call.*.*", count)
        policies = PolicySource(client=clients["ssm"])
        started = time.perf_counter()
        # One derive pass over every shard at once (a deployment runs one per shard: ceil(S/500) per shard),
        # then the apply step, exactly as the state machine runs it after its Map.
        report = derive_within(registry, policies, None, cloudwatch=clients["cloudwatch"], now=NOW).report
        derived_at = time.perf_counter()
        applied = apply_cycle([report.to_dict()], registry, [BatchShareApplier(clients["batch"])], now=NOW)
        seconds = time.perf_counter() - started
        apply_seconds = time.perf_counter() - derived_at

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
            for i in range(min(500, max(report.series, 1)))
        ]
        baseline_started = time.perf_counter()
        for _ in range(report.getmetricdata_calls):
            clients["cloudwatch"].get_metric_data(
                MetricDataQueries=query, StartTime=NOW - timedelta(minutes=5), EndTime=NOW
            )
        baseline = time.perf_counter() - baseline_started

    expected_calls = math.ceil(report.series / 500)
    writes = sum(calls.get(operation, 0) for operation in WRITE_OPERATIONS)
    print(
        f"fleet: {args.jobs} jobs on {args.nodes} nodes x 8 GPUs; derived {report.evaluated}, pending {len(report.changes)}"
    )
    print(
        f"series={report.series} getmetricdata_calls={report.getmetricdata_calls} (ceil(S/500) = {expected_calls})"
    )
    for failure in report.failures:
        print(f"failed {failure['key']} ({failure['kind']}): {failure['error']}")
    print(
        f"apply: applied {len(applied.applied)}, skipped {len(applied.skipped)}, failed {len(applied.failed)}; "
        f"UpdateSchedulingPolicy calls {calls.get('UpdateSchedulingPolicy', 0)}; {apply_seconds:.3f} s"
    )
    for result in applied.failed:
        print(f"not applied {result.job}: {result.reason}")
    print(
        "writes: "
        + ", ".join(
            f"{operation} {calls[operation]}"
            for operation in sorted(WRITE_OPERATIONS)
            if calls.get(operation)
        )
    )
    print(
        f"cycle: {seconds:.3f} s; bare GetMetricData baseline {baseline:.3f} s; ratio {seconds / max(baseline, 1e-9):.2f}x"
    )
    print(
        f"jobs={report.evaluated} series={report.series} getmetricdata_calls={report.getmetricdata_calls} "
        f"writes={writes} seconds={seconds:.3f}"
    )
    ok = report.getmetricdata_calls == expected_calls and not report.failures
    ok = ok and not applied.failed and not applied.unrecorded
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
