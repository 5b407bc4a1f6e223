"""Given Kueue jobs on an EKS cluster (the fake Kubernetes API server) recorded by discovery, when a cycle's real
steps run (collect with the guard, derive, apply; moto DynamoDB, SSM and CloudWatch), then:

- a pool whose policy order is predicted to idle GPUs stands down: each job's decision is ``guarded`` at its
  native priority, its ``inputs.notes`` explain the verdict, the collect step's metrics count it, and the apply
  step writes every Workload to that native priority (all equal here, as their priority classes are);
- a pool where the policy's order qualifies gets the policy's priorities on its Workloads.

The pools are guard_pools' (tests/control/metrics/guard_pools.py), built here as Kubernetes objects.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from osprey_control.backends.eks import DEFAULT_KUEUE_PRIORITY_RANGE, EksApplier, KubernetesClient
from osprey_control.backends.eks.discovery_run import run_discovery
from osprey_control.backends.eks.settings import EksDiscoveryEnvironment
from osprey_control.guard import GUARD_NOTE
from osprey_control.metrics.snapshot import decode
from osprey_control.policy import load_policy_text, policy_parameter_value
from osprey_control.policy_store import PolicySource
from osprey_control.registry import JobRecord
from osprey_control.registry.collections import CollectionStore
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.collect import CollectReport, collect_for_cycle
from osprey_control.steps.derive import derive_within
from osprey_control.telemetry import guard_metrics
from osprey_control.wiring import GUARD_ORDER_NOTE
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import KUEUE, add_workload, metadata
from tests.control.metrics.guard_pools import NATIVE, NATIVE_VALUE, policy_text

NOW = datetime(2026, 1, 1, 6, 0, tzinfo=UTC)
LABELS = {"osprey.aws/enabled": "true", "osprey.aws/policy": "shortest"}
ENV = EksDiscoveryEnvironment(cluster_names=("gpu",))
CAPACITY = "  reservation: {capacityGpus: 16}"


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_job(
    fake: FakeKubernetes,
    name: str,
    *,
    gpus: int,
    hours: float,
    submitted_min_ago: float,
    running_min: float = 0,
) -> dict[str, Any]:
    """A Job of one pod asking ``gpus`` GPUs for at most ``hours`` (activeDeadlineSeconds), running for the last
    ``running_min`` minutes (admitted) or queued (suspended, its Workload not admitted); its Workload at the
    priority its priority class gives, 100."""
    running = running_min > 0
    template = {
        "spec": {"containers": [{"name": "train", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
    }
    obj = fake.add("batch/v1", "jobs", {
        "kind": "Job",
        "metadata": metadata(name, labels=LABELS, creationTimestamp=_iso(NOW - timedelta(minutes=submitted_min_ago))),
        "spec": {"suspend": not running, "parallelism": 1, "activeDeadlineSeconds": int(hours * 3600),
                 "template": template},
        "status": {"active": 1, "ready": 1, "startTime": _iso(NOW - timedelta(minutes=running_min))}
        if running else {},
    })  # fmt: skip
    add_workload(fake, obj, priority=NATIVE_VALUE, admitted=running)
    return obj


def _deploy(ssm: Any, extra: str) -> None:
    policy = load_policy_text(policy_text("shortest", extra), "shortest.yaml").policies[0].policy
    ssm.put_parameter(
        Name="/osprey/policies/shortest", Value=policy_parameter_value(policy), Type="String", Overwrite=True
    )


def _cycle(aws: dict[str, Any], client: KubernetesClient, token: int, now: datetime) -> CollectReport:
    """Discovery, then the cycle's collect, derive (from the stored part) and apply, as the state machine runs
    them; a fresh PolicySource each time, as a new minute's read of the deployed policies."""
    registry: JobRegistry = aws["registry"]
    run_discovery(ENV, connector=lambda _: client, registry=registry)
    store = CollectionStore(registry.table_name, registry.client)
    report = collect_for_cycle(
        registry,
        PolicySource(client=aws["ssm"]),
        store,
        shards=[0],
        token=token,
        cloudwatch=aws["cloudwatch"],
        now=now,
    )
    part = decode(store.get(0, token) or b"")
    derived = derive_within(
        registry,
        PolicySource(client=aws["ssm"]),
        None,
        shard=0,
        cloudwatch=aws["cloudwatch"],
        now=now,
        prior=part,
    )
    apply_cycle([derived.report.to_dict()], registry, [EksApplier(lambda _: client)], now=now)
    return report


def _workload_priority(fake: FakeKubernetes, job: dict[str, Any]) -> int:
    name = f"job-{job['metadata']['name']}-1a2b3"
    return int(fake.stored(KUEUE, "workloads", "ml", name)["spec"]["priority"])


def _records(aws: dict[str, Any]) -> dict[str, JobRecord]:
    return {record.name: record for record in aws["registry"].list_active()}


def test_a_pool_the_policy_would_idle_is_written_back_to_its_native_order(
    aws: dict[str, Any], fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    fake, client = fake_k8s, k8s_client
    # Given the fragmenting pool: a 4-GPU job running for an hour of its 6, and queued (oldest first) 8 GPUs for
    # 5 h, 4 for 30 min and 4 for 2 h, on 2 nodes of 8 GPUs; every Workload at its priority class's 100
    jobs = {
        "w-running": gpu_job(fake, "w-running", gpus=4, hours=6, submitted_min_ago=90, running_min=60),
        "r-big": gpu_job(fake, "r-big", gpus=8, hours=5, submitted_min_ago=30),
        "p-short": gpu_job(fake, "p-short", gpus=4, hours=0.5, submitted_min_ago=20),
        "q-medium": gpu_job(fake, "q-medium", gpus=4, hours=2, submitted_min_ago=10),
    }
    # And a first cycle under the shortest-first policy with the guard off: its priorities reach the Workloads
    _deploy(aws["ssm"], CAPACITY + "\n  guard: {enabled: false}")
    _cycle(aws, client, token=1, now=NOW)
    assert {name: _workload_priority(fake, job) for name, job in jobs.items()} == {
        "w-running": 580, "r-big": 580, "p-short": 960, "q-medium": 830,
    }  # fmt: skip
    off = _records(aws)["p-short"].last_decision or {}
    assert off["inputs"]["notes"][GUARD_NOTE] == "not guarded: spec.guard.enabled is false in shortest"

    # When the guard is enabled and the next cycle runs
    _deploy(aws["ssm"], CAPACITY)
    report = _cycle(aws, client, token=2, now=NOW + timedelta(minutes=1))

    # Then every job's decision is "guarded", at its native priority, and its notes say why
    records = _records(aws)
    for record in records.values():
        decision = record.last_decision or {}
        assert (decision["reason"], decision["priority"], record.derived_priority) == (
            "guarded",
            NATIVE,
            NATIVE,
        )
        assert record.native_priority == NATIVE_VALUE  # discovery kept the job's own, not Osprey's 960
        notes = decision["inputs"]["notes"]
        assert notes[GUARD_NOTE].startswith("stood down to the native order: policy would lose goodput")
        assert notes[GUARD_ORDER_NOTE] == "native"
    # And the collect step counts the pool as guarded and stood down
    points = {(p.name, p.dimensions["Backend"]): p.values for p in guard_metrics(report.guard)}
    assert points[("GuardStoodDown", "eks")] == (1.0,)
    assert points[("GuardEvaluations", "eks")] == (1.0,)
    assert points[("GuardFailures", "eks")] == (0.0,)
    # And the apply step wrote every Workload to that priority: one native place for all, as their classes give
    native = DEFAULT_KUEUE_PRIORITY_RANGE.map(NATIVE)
    assert {name: _workload_priority(fake, job) for name, job in jobs.items()} == dict.fromkeys(jobs, native)
    assert {record.applied_priority for record in records.values()} == {NATIVE}


def _long_then_short(fake: FakeKubernetes) -> dict[str, dict[str, Any]]:
    """16 GPUs, nothing running; queued a 16-GPU job of 5 h, then a 16-GPU job of 30 min."""
    return {
        "a-long": gpu_job(fake, "a-long", gpus=16, hours=5, submitted_min_ago=20),
        "b-short": gpu_job(fake, "b-short", gpus=16, hours=0.5, submitted_min_ago=10),
    }


def test_an_order_that_would_start_a_job_later_than_native_keeps_the_workloads_native(
    aws: dict[str, Any], fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    fake, client = fake_k8s, k8s_client
    # Given 16 GPUs, nothing running, and queued a 16-GPU job of 5 h, then a 16-GPU job of 30 min: shortest first
    # waits far less, but starts the 5-hour job 30 minutes later than Kueue's own order does
    jobs = _long_then_short(fake)
    _deploy(aws["ssm"], CAPACITY)

    # When a cycle runs with the guard on
    report = _cycle(aws, client, token=1, now=NOW)

    # Then the guard stood down, every Workload keeps its native place, and the decision says which rule refused
    [pool] = report.guard
    assert (pool.chosen, pool.stood_down) == ("native", True)
    records = _records(aws)
    native = DEFAULT_KUEUE_PRIORITY_RANGE.map(NATIVE)
    assert {name: _workload_priority(fake, job) for name, job in jobs.items()} == dict.fromkeys(jobs, native)
    note = (records["b-short"].last_decision or {})["inputs"]["notes"][GUARD_NOTE]
    assert "policy would start 1 job later than native" in note


def test_with_the_guard_off_the_policys_priorities_reach_the_workloads(
    aws: dict[str, Any], fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    fake, client = fake_k8s, k8s_client
    # Given the same pool, and a policy that turns the guard off (spec.guard.enabled: false)
    jobs = _long_then_short(fake)
    _deploy(aws["ssm"], CAPACITY + "\n  guard: {enabled: false}")

    # When a cycle runs
    report = _cycle(aws, client, token=1, now=NOW)

    # Then no pool was guarded, and the policy's order is on the Workloads: the short job first
    assert [(pool.chosen, pool.skipped) for pool in report.guard] == [(None, "disabled")]
    records = _records(aws)
    assert {name: (r.last_decision or {})["reason"] for name, r in records.items()} == dict.fromkeys(
        jobs, "derived"
    )
    assert {name: _workload_priority(fake, job) for name, job in jobs.items()} == {
        "a-long": 580,
        "b-short": 960,
    }
