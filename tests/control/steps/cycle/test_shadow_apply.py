"""Shadow mode in the apply step (issue 30, item 1): given pending jobs on every backend, when the cycle applies
in shadow, then no backend's API is called at all (botocore Stubbers with nothing queued, the fake Kubernetes
API server, a recording slurmctld), the registry records what would have been written, and a job's first
enforce cycle applies it normally. The apply Lambda reads the mode from ``/osprey/config`` on each invocation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from osprey_control.backends import DERIVED_PRIORITY_TAG, Applier, Outcome
from osprey_control.backends.batch import BatchShareApplier
from osprey_control.backends.eks import EksApplier
from osprey_control.backends.eks.client import KubernetesClient
from osprey_control.backends.sagemaker import TrainingJobTagApplier
from osprey_control.backends.sagemaker_queue import ServiceJobApplier
from osprey_control.backends.slurm import SlurmApplier
from osprey_control.contract import parse_block
from osprey_control.policy_store import PolicySource
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.items import record_to_item
from osprey_control.registry.shares import ShareLedger
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.derive import derive_within
from osprey_control.steps.mode import Mode, ModeSettings
from osprey_handlers import apply as apply_handler
from tests.control.backends.appliers.test_slurm_ownership import MARKED, Slurmctld
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.steps.cycle.conftest import NOW
from tests.control.steps.cycle.test_apply_step import sagemaker_job
from tests.lambda_context import lambda_context

BLOCK = parse_block({"priority_derivation_profile": "training-policy"})
JOBS = {
    Backend.SAGEMAKER: "llama-train",
    Backend.SAGEMAKER_QUEUED: "svc-1",
    Backend.BATCH: "batch-1",
    Backend.EKS: "gpu-a/ml/train/0a1b2c3d-0000-4000-8000-000000000001",
    Backend.SLURM: "train/42",
}


class Calls:
    """Every API operation a botocore client is asked for, before any Stubber or HTTP sees it."""

    def __init__(self, *clients: Any) -> None:
        self.made: list[str] = []
        for client in clients:
            client.meta.events.register("before-call.*.*", self._note)

    def _note(self, model: Any, **_: Any) -> None:
        self.made.append(model.name)


def _pending(registry: JobRegistry, backend: Backend, native_id: str, derived: int) -> JobKey:
    record = JobRecord(
        backend=backend,
        native_id=native_id,
        name=native_id.rsplit("/", 1)[-1],
        block=BLOCK,
        status=JobStatus.RUNNING,
        status_time=NOW - timedelta(minutes=5),
        share_identifier="osprey-job-batch-1" if backend is Backend.BATCH else None,
        cluster="gpu-a" if backend is Backend.EKS else ("train" if backend is Backend.SLURM else None),
        derived_priority=derived,
        applied_priority=40,
        last_changed_at=NOW - timedelta(minutes=1),
    )
    registry.client.put_item(TableName=registry.table_name, Item=record_to_item(record, shards=1))
    return record.key


@pytest.fixture
def stubbed() -> Iterator[dict[str, Any]]:
    """A Stubber with nothing queued on each AWS backend's client: any call would fail the job's apply."""
    clients = {name: boto3.client(name, region_name="us-east-1") for name in ("sagemaker", "batch")}
    queue = boto3.client("batch", region_name="us-east-1")
    stubbers = [Stubber(client) for client in (*clients.values(), queue)]
    for stubber in stubbers:
        stubber.activate()
    yield {**clients, "queue": queue, "calls": Calls(*clients.values(), queue)}
    for stubber in stubbers:
        stubber.assert_no_pending_responses()
        stubber.deactivate()


def test_shadow_calls_no_backend_and_records_what_would_have_been_written(
    aws: dict[str, Any], stubbed: dict[str, Any], fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    registry: JobRegistry = aws["registry"]
    # Given one pending job per backend (derived 73, the backend holding 40), every applier a real one
    keys = [_pending(registry, backend, native_id, 73) for backend, native_id in JOBS.items()]
    slurm = Slurmctld({42: MARKED})
    appliers: list[Applier] = [
        TrainingJobTagApplier(stubbed["sagemaker"]),
        ServiceJobApplier(stubbed["queue"]),
        BatchShareApplier(
            stubbed["batch"],
            ShareLedger(registry.table_name, registry.client),
            lambda: registry.list_active(backend=Backend.BATCH),
        ),
        EksApplier(lambda cluster: k8s_client),
        SlurmApplier(slurm.connect),
    ]
    shadow = ModeSettings(default=Mode.SHADOW)

    # When the apply step runs a cycle in shadow mode
    report = apply_cycle([{"shard": None}], registry, appliers, now=NOW, modes=shadow)

    # Then no backend was asked anything: no AWS call, no Kubernetes request, no Slurm connection
    assert stubbed["calls"].made == []
    assert fake_k8s.requests == []
    assert (slurm.connected, slurm.updates) == ([], [])
    assert report.writes == 0
    # ... every job's outcome is shadow, saying what would have been written and why
    assert {result.job: result.outcome for result in report.results} == dict.fromkeys(keys, Outcome.SHADOW)
    reasons = {result.job.backend: result.reason for result in report.results}
    assert reasons[Backend.BATCH] == (
        "shadow (the deployment's default is shadow): would write 73 to batch; nothing written"
    )
    # ... the registry records the would-be value, the backend's value is untouched, and the job stays pending
    for key in keys:
        record = registry.get(key)
        assert record is not None
        assert (record.shadow_priority, record.shadow_at, record.applied_priority) == (73, NOW, 40)
        assert record.apply_pending()
        assert record.apply_failure is None
        (line,) = registry.events.apply_events(key)
        assert (line["outcome"], line["priority"]) == ("shadow", 73)
    assert sorted(registry.pending_keys(None)) == sorted(keys)

    # And a second shadow cycle with nothing new writes nothing, not even to the registry
    versions = {key: registry.get(key).version for key in keys}  # type: ignore[union-attr]
    again = apply_cycle([{"shard": None}], registry, appliers, now=NOW + timedelta(minutes=1), modes=shadow)
    assert [result.outcome for result in again.results] == [Outcome.SHADOW] * len(keys)
    assert {key: registry.get(key).version for key in keys} == versions  # type: ignore[union-attr]
    assert all(len(registry.events.apply_events(key)) == 1 for key in keys)
    assert stubbed["calls"].made == []
    assert fake_k8s.requests == []
    assert slurm.connected == []


def test_a_shadow_only_backend_stays_shadow_while_the_rest_is_enforced(
    aws: dict[str, Any], fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    registry: JobRegistry = aws["registry"]
    # Given a Slurm job and an EKS job, Slurm pinned to shadow and the deployment enforcing
    slurm_key = _pending(registry, Backend.SLURM, JOBS[Backend.SLURM], 73)
    slurm = Slurmctld({42: MARKED})
    modes = ModeSettings(shadow_only=frozenset({"slurm"}), policies={"training-policy": Mode.ENFORCE})
    # When the cycle applies
    report = apply_cycle([{"shard": None}], registry, [SlurmApplier(slurm.connect)], now=NOW, modes=modes)
    # Then the policy's enforce does not reach the shadow-only backend
    (result,) = report.results
    assert (result.job, result.outcome) == (slurm_key, Outcome.SHADOW)
    assert "backend slurm is shadow-only" in result.reason
    assert slurm.connected == []


def test_the_first_enforce_cycle_after_shadow_applies_normally(aws: dict[str, Any]) -> None:
    # Given a SageMaker job derived to 60 and applied in shadow: the job carries no priority tag
    arn = sagemaker_job(aws, "llama-train")
    derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    )
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    applier = TrainingJobTagApplier(sagemaker)
    shadow = apply_cycle(
        [{"shard": None}], aws["registry"], [applier], now=NOW, modes=ModeSettings(default=Mode.SHADOW)
    )
    assert [result.outcome for result in shadow.results] == [Outcome.SHADOW]
    tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]}
    assert DERIVED_PRIORITY_TAG not in tags

    # When the SageMaker backend is switched to enforce and the next cycle runs
    enforce = ModeSettings(default=Mode.SHADOW, backends={"sagemaker": Mode.ENFORCE})
    later = NOW + timedelta(minutes=1)
    applied = apply_cycle([{"shard": None}], aws["registry"], [applier], now=later, modes=enforce)

    # Then the derived priority is written and recorded applied, and the shadow mark is gone
    assert [result.outcome for result in applied.results] == [Outcome.APPLIED]
    tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]}
    assert tags[DERIVED_PRIORITY_TAG] == "60"
    record = aws["registry"].get(JobKey(Backend.SAGEMAKER, "llama-train"))
    assert (record.applied_priority, record.shadow_priority, record.shadow_at) == (60, None, None)
    outcomes = [
        line["outcome"] for line in aws["registry"].events.apply_events(record.key, newest_first=False)
    ]
    assert outcomes == ["shadow", "applied"]


@pytest.fixture
def handler_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OSPREY_TABLE_NAME", "osprey-jobs")
    monkeypatch.setenv("OSPREY_REGISTRY_SHARDS", "1")
    monkeypatch.setenv("OSPREY_CONFIG_PARAMETER", "/osprey/config")
    apply_handler._components.cache_clear()
    yield
    apply_handler._components.cache_clear()


def _config(ssm: Any, mode: dict[str, Any]) -> None:
    value = json.dumps({"tableName": "osprey-jobs", "mode": mode})
    ssm.put_parameter(Name="/osprey/config", Value=value, Type="String", Overwrite=True)


def test_the_apply_lambda_reads_the_mode_each_invocation(aws: dict[str, Any], handler_env: None) -> None:
    # Given a deployment whose /osprey/config says shadow, and a job derived to 60
    _config(aws["ssm"], {"default": "shadow", "backends": {}, "policies": {}, "shadowOnly": []})
    arn = sagemaker_job(aws, "llama-train")
    shard = derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    ).report.to_dict()
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")

    # When the apply Lambda runs: nothing is written, and its answer counts the shadow job
    answer = apply_handler.handler({"shards": [shard]}, lambda_context("osprey-apply"))
    assert answer == {"applied": 0, "skipped": 0, "failed": 0, "failures": [], "writes": 0, "shadow": 1}
    assert DERIVED_PRIORITY_TAG not in {t["Key"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]}

    # And once the parameter says enforce for SageMaker (no code change, the same warm function)
    _config(aws["ssm"], {"default": "shadow", "backends": {"sagemaker": "enforce"}})
    answer = apply_handler.handler({"shards": [shard]}, lambda_context("osprey-apply"))

    # Then the next invocation writes it
    assert answer == {"applied": 1, "skipped": 0, "failed": 0, "failures": [], "writes": 1}
    assert {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]}[
        DERIVED_PRIORITY_TAG
    ] == "60"


def test_an_unreadable_mode_stops_the_apply_before_any_write(aws: dict[str, Any], handler_env: None) -> None:
    # Given a config parameter whose mode is not one the control plane knows
    _config(aws["ssm"], {"default": "observe"})
    sagemaker_job(aws, "llama-train")
    shard = derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    ).report.to_dict()
    # When the apply Lambda runs, then it fails naming the field, and the job stays pending
    with pytest.raises(ValueError, match=r"mode\.default: Input should be 'shadow' or 'enforce'"):
        apply_handler.handler({"shards": [shard]}, lambda_context("osprey-apply"))
    record = aws["registry"].get(JobKey(Backend.SAGEMAKER, "llama-train"))
    assert record.applied_priority is None
    assert record.apply_pending()
