"""End to end: the synthesized cycle state machine, run by moto's Step Functions interpreter, with the real
Lambda handlers executing in-process over a seeded registry and CloudWatch metrics, applies the priorities the
policy formula gives (DESIGN §4) to AWS Batch share weights, SageMaker service jobs and tags, and Kueue
Workloads of EKS jobs the cycle discovers on a fake Kubernetes API server (DESIGN §6).

What is real: the template (``build_app()``, cdk-nag on), the definition (only its tokens resolved to the moto
resources), every function's Handler and Environment, the policies' SSM parameters, the handlers and all of
``osprey_control``. What is simulated: AWS itself (moto), Batch service jobs, which moto lacks
(``osprey.local.service_jobs``), and the EKS cluster's API server (``tests/control/backends/eks/fake_k8s.py``, set as the
moto cluster's endpoint).
"""

from __future__ import annotations

import base64
import math
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from osprey_control.backends.batch import weight_factor
from osprey_control.contract import batch_scheduling_priority
from osprey_control.policy.loader import load_policy_text
from osprey_control.policy.stored import policy_parameter_value
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.backends.eks.fake_k8s import FakeKubernetes, run_fake
from tests.control.backends.eks.objects import OSPREY_LABELS, add_job, add_workload
from tests.infra.e2e.fleet import Fleet
from tests.infra.e2e.harness import (
    CycleHarness,
    deployed,
    synthesized_template,
)

RULE_ARN = "arn:aws:lambda:us-east-1:123456789012:function:osprey-rule-crash"
CRASHING_RULE_POLICY = f"""
apiVersion: osprey.aws/v1
kind: PriorityDerivationPolicy
metadata: {{name: crashing-rule-policy}}
spec:
  maxPriorityChange: 100
  derivationRules:
  - {{metric: gpu_utilization, weight: 1, scaling: linear, minPriority: 0, maxPriority: 100}}
  - custom: {{arn: "{RULE_ARN}", fallbackPriority: 90, weight: 1}}
"""


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return synthesized_template()


@pytest.fixture
def cycle(template: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[CycleHarness]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with deployed(template) as harness:
        yield harness


@pytest.fixture
def fleet(cycle: CycleHarness) -> Fleet:
    environment = cycle.client("lambda").get_function_configuration(FunctionName=cycle.function("derive"))
    variables = environment["Environment"]["Variables"]
    registry = JobRegistry(
        variables["OSPREY_TABLE_NAME"],
        client=cycle.client("dynamodb"),
        shards=int(variables["OSPREY_REGISTRY_SHARDS"]),
    )
    fleet = Fleet(registry, cycle.client("batch"), cycle.client("cloudwatch"), cycle.service_jobs)
    fleet.create_queues(cycle.client("iam"))
    return fleet


def training_policy(gpu: float, memory_bandwidth: float | None) -> float:
    """DESIGN §4 for the shipped training-policy: linear GPU 10..100 (w 0.6), logarithmic memory bandwidth
    5..100 (w 0.3); the interconnect rule has no data here and is skipped, so the weights renormalise."""
    components = [(0.6, 10 + 90 * gpu / 100)]
    if memory_bandwidth is not None:
        components.append((0.3, 5 + 95 * math.log10(1 + 9 * memory_bandwidth / 100)))
    return sum(w * p for w, p in components) / sum(w for w, _ in components)


def test_a_cycle_applies_the_policy_priorities_to_batch_shares_sagemaker_service_jobs_and_tags(
    cycle: CycleHarness, fleet: Fleet
) -> None:
    # Given three Batch jobs, a queued and a direct SageMaker job, all at the initial priority 50
    fleet.batch_job("busy", gpu=90, memory_bandwidth=60)  # base 87.9: +10 at most per cycle -> 60
    fleet.batch_job("steady", gpu=50, memory_bandwidth=30)  # base 56.3 -> 56
    fleet.batch_job("idle", gpu=10, memory_bandwidth=5)  # base 19.4: -10 at most -> 40
    fleet.queued_sagemaker_job("bert", gpu=52)  # SageMaker: GPU only (sum 416 over 8 GPUs) -> 56.8 -> 57
    fleet.direct_sagemaker_job(cycle.client("sagemaker"), "gpt", gpu=40)  # 46.0 -> 46
    expected = {"busy": 60, "steady": 56, "idle": 40, "bert": 57, "gpt": 46}

    # When the state machine runs one cycle
    execution = cycle.run("cycle-1")

    # Then it succeeds through every step and releases its lease
    assert execution.status == "SUCCEEDED", execution
    assert execution.states[:3] == ["AcquireLease", "LeaseAcquired", "PlanShards"]
    assert {"DeriveShards", "ApplyPriorities", "Finish", "CycleSucceeded"} <= set(execution.states)
    # Writes: one UpdateSchedulingPolicy for the three Batch jobs, one UpdateServiceJob, one AddTags
    assert execution.output["apply"] == {"applied": 5, "skipped": 0, "failed": 0, "failures": [], "writes": 3}
    assert execution.output["finished"]["released"] is True
    # ... the registry records each decision, derived from the metrics by the policy formula
    for label, priority in expected.items():
        record = fleet.record(label)
        assert (record.derived_priority, record.applied_priority) == (priority, priority), label
    assert {label: fleet.decision(label)["previous"] for label in expected} == dict.fromkeys(expected, 50)
    bases = {label: fleet.decision(label)["base"] for label in expected}
    assert bases["busy"] == pytest.approx(training_policy(90, 60))
    assert bases["steady"] == pytest.approx(training_policy(50, 30))
    assert bases["idle"] == pytest.approx(training_policy(10, 5))
    assert bases["bert"] == pytest.approx(training_policy(52, None))
    assert bases["gpt"] == pytest.approx(training_policy(40, None))
    # ... Batch got one scheduling-policy update with every job's weight, the other share untouched
    assert fleet.share_weights() == {
        "analytics": 0.5,
        "osprey-job-busy": weight_factor(60),
        "osprey-job-steady": weight_factor(56),
        "osprey-job-idle": weight_factor(40),
    }
    assert weight_factor(60) < weight_factor(56) < weight_factor(40)  # lower weight = more capacity
    # ... and the queued SageMaker job got UpdateServiceJob on Batch's 0..9999 scale
    bert = fleet.keys["bert"].native_id
    assert cycle.service_jobs.updates == [
        {"jobId": bert, "schedulingPriority": batch_scheduling_priority(57)}
    ]
    assert cycle.service_jobs.jobs[bert].scheduling_priority == 5699
    # ... and the direct SageMaker job, which has no priority of its own, carries the decision as a tag
    arn = fleet.record("gpt").arn
    tags = {t["Key"]: t["Value"] for t in cycle.client("sagemaker").list_tags(ResourceArn=arn)["Tags"]}
    assert tags == {"osprey:enabled": "true", "osprey:derived-priority": "46"}


def test_a_second_execution_while_the_lease_is_held_does_nothing_and_the_next_cycle_continues(
    cycle: CycleHarness, fleet: Fleet
) -> None:
    # Given a cycle that is inside its derive step (holding the lease) ...
    fleet.batch_job("busy", gpu=90, memory_bandwidth=60)
    from osprey_handlers.derive import handler as derive  # noqa: PLC0415 - the real handler, gated

    inside, release = threading.Event(), threading.Event()

    def gated_derive(event: dict[str, Any], context: Any) -> Any:
        inside.set()
        assert release.wait(30), "the test never released the first cycle"
        return derive(event, context)

    cycle.runtime.overrides[cycle.function("derive")] = gated_derive
    first = cycle.start("cycle-1")
    assert inside.wait(30), "the first cycle never reached its derive step"

    # When a second execution starts meanwhile
    second = cycle.run("cycle-2")

    # Then the second one succeeds without deriving or applying anything
    assert second.status == "SUCCEEDED"
    assert second.states == ["AcquireLease", "LeaseAcquired", "SkippedLeaseHeld"]
    assert cycle.invoked().count("lease") == 2
    assert "apply" not in cycle.invoked()
    # ... and the first one, released, applies its decision once and gives the lease back
    release.set()
    assert cycle.wait(first).status == "SUCCEEDED"
    assert fleet.record("busy").applied_priority == 60
    assert len(fleet.registry.history(fleet.keys["busy"])) == 1  # one decision: no second writer
    # ... so the next cycle runs, and damping moves the busy job another step
    cycle.runtime.overrides.clear()
    third = cycle.run("cycle-3")
    assert third.status == "SUCCEEDED"
    assert "SkippedLeaseHeld" not in third.states
    assert fleet.share_weights()["osprey-job-busy"] == weight_factor(70)


def test_a_custom_rule_that_raises_yields_its_fallback_and_the_cycle_still_succeeds(
    cycle: CycleHarness, fleet: Fleet
) -> None:
    # Given a policy whose custom rule (an allowed osprey-rule-* function) raises on every call
    [loaded] = load_policy_text(CRASHING_RULE_POLICY, "crashing-rule-policy.yaml").policies
    cycle.client("ssm").put_parameter(
        Name="/osprey/policies/crashing-rule-policy",
        Value=policy_parameter_value(loaded.policy),
        Type="String",
    )
    assert cycle.create_rule_function("osprey-rule-crash", "tests.infra.e2e.rules.crash") == RULE_ARN
    fleet.batch_job("crashy", gpu=20, memory_bandwidth=10, policy="crashing-rule-policy")
    fleet.batch_job("busy", gpu=90, memory_bandwidth=60)

    # When a cycle runs
    execution = cycle.run("cycle-1")

    # Then the rule was really invoked, failed, and its fallback 90 was averaged with the GPU rule's 20
    assert execution.status == "SUCCEEDED", execution
    assert "osprey-rule-crash" in cycle.invoked()
    custom = [rule for rule in fleet.decision("crashy")["rules"] if rule["kind"] == "custom"]
    assert [(rule["priority"], rule["outcome"]) for rule in custom] == [(90.0, "fallback:error")]
    assert fleet.record("crashy").applied_priority == 55
    # ... and both jobs' priorities were applied
    assert fleet.share_weights()["osprey-job-crashy"] == weight_factor(55)
    assert fleet.share_weights()["osprey-job-busy"] == weight_factor(60)


def test_a_failing_shard_is_reported_and_the_other_shards_are_still_applied(
    cycle: CycleHarness, fleet: Fleet
) -> None:
    # Given two jobs in different registry shards, and a derive step that fails on the first job's shard
    broken_key = fleet.batch_job("broken", gpu=90, memory_bandwidth=60)
    broken_shard = fleet.registry.shard_of(broken_key)
    for attempt in range(32):  # job ids are random: add jobs until one lands in another shard
        other = fleet.batch_job(f"healthy{attempt}", gpu=90, memory_bandwidth=60)
        if fleet.registry.shard_of(other) != broken_shard:
            break
    healthy = next(label for label, key in fleet.keys.items() if key == other)
    from osprey_handlers.derive import handler as derive  # noqa: PLC0415 - the real handler, but one shard fails

    def failing_derive(event: dict[str, Any], context: Any) -> Any:
        if event.get("shard") == broken_shard:
            raise ConnectionError("shard lost its connection to DynamoDB")
        return derive(event, context)

    cycle.runtime.overrides[cycle.function("derive")] = failing_derive

    # When a cycle runs
    execution = cycle.run("cycle-1")

    # Then the cycle succeeds, reports the failed shard, and applies the other shards' changes
    assert execution.status == "SUCCEEDED", execution
    failed = [shard for shard in execution.output["shards"] if shard.get("failed")]
    assert [(shard["shard"], shard["error"]["Error"]) for shard in failed] == [
        (broken_shard, "ConnectionError")
    ]
    assert fleet.record("broken").applied_priority is None
    assert fleet.record(healthy).applied_priority == 60
    assert fleet.share_weights()[f"osprey-job-{healthy}"] == weight_factor(60)
    assert "osprey-job-broken" not in fleet.share_weights()


def test_an_execution_with_cycles_runs_them_back_to_back_each_with_the_lease(
    cycle: CycleHarness, fleet: Fleet
) -> None:
    # Given the sub-minute form the schedule uses: several cycles per execution (interval 0 s: no real wait)
    fleet.batch_job("busy", gpu=90, memory_bandwidth=60)

    # When one execution runs two cycles
    execution = cycle.run("cycles-2", {"cycles": 2, "intervalSeconds": 0})

    # Then both cycles took the lease, derived and applied: damping moved the job twice (50 -> 60 -> 70)
    assert execution.status == "SUCCEEDED", execution
    assert execution.states.count("AcquireLease") == 2
    assert execution.states.count("ApplyPriorities") == 2
    assert {"WaitForNextCycle", "NextCycle"} <= set(execution.states)
    assert execution.states[-1] == "CycleSucceeded"
    assert [item["derived_priority"] for item in reversed(fleet.registry.history(fleet.keys["busy"]))] == [
        60,
        70,
    ]
    assert fleet.share_weights()["osprey-job-busy"] == weight_factor(70)
    assert execution.output["finished"]["released"] is True


@pytest.fixture(scope="module")
def eks_template() -> dict[str, Any]:
    return synthesized_template({"osprey:eksClusters": "gpu"})


@pytest.fixture
def kubernetes() -> Iterator[FakeKubernetes]:
    yield from run_fake(FakeKubernetes())


def test_an_eks_job_is_discovered_by_the_cycle_and_its_kueue_workload_gets_the_priority(
    eks_template: dict[str, Any], kubernetes: FakeKubernetes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # Given an EKS cluster whose API server is the fake one, running an Osprey Job admitted by Kueue on one pod
    job = add_job(kubernetes, "train", status={"active": 1, "ready": 1, "startTime": "2026-12-01T00:00:00Z"})
    workload = add_workload(kubernetes, job, priority=500)
    labels = {**OSPREY_LABELS, "batch.kubernetes.io/job-name": "train"}
    kubernetes.add(
        "v1", "pods", {"kind": "Pod", "metadata": {"name": "train-0", "namespace": "ml", "labels": labels}}
    )
    with deployed(eks_template) as cycle:
        cycle.client("eks").create_cluster(
            name="gpu", roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={"subnetIds": []}
        )
        from moto.eks.models import eks_backends  # noqa: PLC0415 - moto's cluster has no reachable endpoint

        cluster = eks_backends[cycle.deployment.account]["us-east-1"].clusters["gpu"]
        cluster.endpoint = kubernetes.url
        # moto's CA is random text, not base64 of a PEM; a real one is (and is unused for a loopback http server).
        cluster.certificate_authority = {"data": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()}
        # ... and Container Insights reporting the pod's GPUs 70 % busy (training-policy: 10 + 90 * 0.7 = 73)
        cycle.client("cloudwatch").put_metric_data(
            Namespace="ContainerInsights",
            MetricData=[
                {
                    "MetricName": "pod_gpu_utilization",
                    "Dimensions": [
                        {"Name": "ClusterName", "Value": "gpu"},
                        {"Name": "Namespace", "Value": "ml"},
                        {"Name": "PodName", "Value": "train-0"},
                    ],
                    "Value": 70.0,
                    "Timestamp": datetime.now(UTC) - timedelta(minutes=1),
                }
            ],
        )

        # When a cycle runs
        execution = cycle.run("cycle-1")

        # Then discovery registered the job, the cycle derived it (50 -> 60, damped) and patched its Workload
        assert execution.status == "SUCCEEDED", execution
        assert execution.states.index("DiscoverEksJobs") < execution.states.index("PlanShards")
        registry = JobRegistry(cycle.deployment_table(), client=cycle.client("dynamodb"), shards=16)
        # (keyed <cluster>/<namespace>/<name>/<uid>: osprey_control.registry.identity)
        record = registry.get(JobKey(Backend.EKS, f"gpu/ml/train/{job['metadata']['uid']}"))
        assert record is not None
        assert (record.cluster, record.applied_priority) == ("gpu", 60)
        patched = kubernetes.objects[(workload["apiVersion"], "workloads")][
            ("ml", workload["metadata"]["name"])
        ]
        assert patched["spec"]["priority"] == 600  # Kueue's default band 0..1000


def test_each_cycle_passes_its_lease_token_to_the_derive_shards_and_to_apply(
    cycle: CycleHarness, fleet: Fleet
) -> None:
    # Given a job, and the real derive and apply handlers wrapped to record the events they get
    fleet.batch_job("busy", gpu=90, memory_bandwidth=60)
    from osprey_handlers.apply import handler as apply  # noqa: PLC0415 - the real handlers, observed
    from osprey_handlers.derive import handler as derive  # noqa: PLC0415

    events: list[tuple[str, dict[str, Any]]] = []

    def observed(step: str, handler: Any) -> Any:
        def call(event: dict[str, Any], context: Any) -> Any:
            events.append((step, event))
            return handler(event, context)

        return call

    cycle.runtime.overrides[cycle.function("derive")] = observed("derive", derive)
    cycle.runtime.overrides[cycle.function("apply")] = observed("apply", apply)

    # When one execution runs two cycles
    execution = cycle.run("cycles-2", {"cycles": 2, "intervalSeconds": 0})

    # Then each cycle's steps got that cycle's token, one higher than the cycle before's, and wrote with it
    assert execution.status == "SUCCEEDED", execution
    tokens = [event["token"] for _, event in events]
    assert [step for step, _ in events] == ["derive", "apply", "derive", "apply"]
    assert tokens[0] == tokens[1]
    assert tokens[2] == tokens[3] == tokens[0] + 1
    assert "fenceLost" not in execution.output["apply"]
    assert fleet.share_weights()["osprey-job-busy"] == weight_factor(70)
