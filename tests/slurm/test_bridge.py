"""The Slurm bridge Lambda against a real Slurm: discovery into the registry (moto DynamoDB, the JWT signing
key in moto Secrets Manager) and the apply step's invocation of the bridge. The one double is the Lambda
Invoke itself (an in-process call of the real handler with the JSON round trip a real Invoke makes), since
moto cannot run a function that must reach slurmrestd on localhost."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.backends import Deployment, Outcome, driver_for
from osprey_control.backends.slurm import DRIVER, Ec2InstanceMap, marker
from osprey_control.backends.slurm.bridge import BridgeSettings, SlurmBridgeApplier
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.steps.apply import apply_cycle
from osprey_handlers import slurm_discovery
from tests.lambda_context import lambda_context
from tests.slurm.cluster import LocalSlurm

TABLE = "osprey-bridge-test"
MARK = "--comment=" + marker(parse_block({"priority_derivation_profile": "training-policy"}))


class _InProcessLambda:
    """Invoke = the bridge handler called with the JSON a real Invoke would carry (see the module docstring)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def invoke(self, FunctionName: str, Payload: bytes) -> dict[str, Any]:  # noqa: N803 - boto3's names
        event = json.loads(Payload)
        self.calls.append({"function": FunctionName, "event": event})
        answer = slurm_discovery.handler(event, lambda_context("osprey-slurm-bridge", 256))
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


@pytest.fixture
def bridge(clean: LocalSlurm, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobRegistry]:
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        # The form docs/slurm.md recommends: an expiring token from `scontrol token`, as the rotation job stores it
        token = clean.run("scontrol", "token", "username=root", "lifespan=3600").strip()
        arn = secrets.create_secret(Name="osprey/slurm-jwt", SecretString=token)["ARN"]
        registry = JobRegistry(TABLE, boto3.client("dynamodb", region_name="us-east-1"), shards=2)
        registry.create_table()
        for name, value in {
            "OSPREY_SLURM_URL": clean.url,
            "OSPREY_SLURM_INSECURE_HTTP": "true",  # loopback to the test cluster
            "OSPREY_SLURM_CLUSTER": clean.cluster,
            "OSPREY_SLURM_TOKEN_SECRET": arn,
            "OSPREY_SLURM_USER": "root",
            "OSPREY_TABLE_NAME": TABLE,
            "OSPREY_REGISTRY_SHARDS": "2",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            monkeypatch.setenv(name, value)
        slurm_discovery._settings.cache_clear()
        slurm_discovery._registry.cache_clear()
        yield registry
        slurm_discovery._settings.cache_clear()
        slurm_discovery._registry.cache_clear()


def test_the_bridge_discovers_into_the_registry_and_applies_what_the_apply_step_hands_it(
    clean: LocalSlurm, bridge: JobRegistry
) -> None:
    # Given a full cluster and two marked jobs queued behind it
    blocker = clean.sbatch("-N4", "--exclusive", "-t", "5", wrap="sleep 300")
    clean.wait_state(blocker, "RUNNING")
    first = clean.sbatch("-N4", "--exclusive", "-t", "5", MARK, wrap="sleep 300")
    second = clean.sbatch("-N4", "--exclusive", "-t", "5", MARK, wrap="sleep 300")
    # When the bridge's scheduled discovery runs
    summary = slurm_discovery.handler({"action": "discover"}, lambda_context("osprey-slurm-bridge", 256))
    # Then both jobs are in the registry (the blocker has no marker)
    assert (summary["jobs"], summary["recorded"], summary["unmanaged"]) == (2, 2, 1)
    keys = [_key(clean, job) for job in (first, second)]
    assert all(bridge.get(key) is not None for key in keys)
    # When the cycle derives second above first and the apply step runs with the apply function's appliers
    now = datetime.now(UTC)
    for key, priority in zip(keys, (20, 85), strict=True):
        record = bridge.get(key)
        assert record is not None
        bridge.record_decision(key, {"reason": "derived"}, priority, record.version, now)
    lambda_client = _InProcessLambda()
    appliers = [SlurmBridgeApplier("osprey-slurm-bridge", client=lambda_client)]
    report = apply_cycle([{"shard": None}], bridge, appliers, now=now)
    # Then one Invoke carried both jobs, Slurm holds the mapped priorities and orders its queue by them
    assert len(lambda_client.calls) == 1
    assert [r.outcome for r in report.results] == [Outcome.APPLIED, Outcome.APPLIED]
    assert clean.sprio() == {first: 2001, second: 8501}
    assert clean.squeue_order() == [second, first]
    stored = bridge.get(keys[1])
    assert stored is not None
    assert stored.applied_priority == 85
    assert blocker in clean.squeue_states()


def test_a_bridge_that_cannot_be_invoked_fails_its_jobs_transiently() -> None:
    class _Throttled:
        def invoke(self, **_: Any) -> dict[str, Any]:
            from botocore.exceptions import ClientError  # noqa: PLC0415

            raise ClientError(
                {"Error": {"Code": "TooManyRequestsException", "Message": "Rate exceeded"}}, "Invoke"
            )

    from osprey_control.backends import PriorityChange  # noqa: PLC0415
    from osprey_control.registry import JobRecord, JobStatus  # noqa: PLC0415

    record = JobRecord(
        backend=Backend.SLURM,
        native_id="pc/7",
        name="7",
        block=parse_block({"priority_derivation_profile": "p1"}),
        status=JobStatus.PENDING,
        status_time=datetime.now(UTC),
        cluster="pc",
    )
    result = SlurmBridgeApplier("bridge", client=_Throttled()).apply([PriorityChange(record, 40)]).results[0]
    assert result.outcome is Outcome.FAILED
    assert result.transient
    assert "Rate exceeded" in result.reason


def test_settings_name_the_variable_that_is_wrong_and_the_apply_function_finds_its_bridge() -> None:
    with pytest.raises(ValueError, match="OSPREY_SLURM_URL"):
        BridgeSettings.model_validate(
            {
                "OSPREY_SLURM_URL": "10.0.0.1:6820",
                "OSPREY_SLURM_CLUSTER": "pc",
                "OSPREY_SLURM_TOKEN_SECRET": "s",
            }
        )
    with pytest.raises(ValueError, match="OSPREY_SLURM_PRIORITY_RANGE"):
        BridgeSettings.model_validate(
            {
                "OSPREY_SLURM_URL": "https://10.0.0.1:6820",
                "OSPREY_SLURM_CLUSTER": "pc",
                "OSPREY_SLURM_TOKEN_SECRET": "s",
                "OSPREY_SLURM_PRIORITY_RANGE": "0..100",
            }
        )
    with pytest.raises(ValueError, match="OSPREY_SLURM_INSECURE_HTTP"):
        BridgeSettings.model_validate(
            {
                "OSPREY_SLURM_URL": "http://10.0.0.1:6820",
                "OSPREY_SLURM_CLUSTER": "pc",
                "OSPREY_SLURM_TOKEN_SECRET": "s",
            }
        )
    # And the apply step has a Slurm applier exactly when the deployment has a bridge
    assert DRIVER.applier(Deployment()) is None
    applier = DRIVER.applier(Deployment(environment={"OSPREY_SLURM_BRIDGE_FUNCTION": "f"}))
    assert isinstance(applier, SlurmBridgeApplier)
    assert applier.function_name == "f"


def test_parallelcluster_nodes_map_to_their_instances_by_private_address() -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        tags: Any = [
            {"ResourceType": "instance", "Tags": [{"Key": "parallelcluster:cluster-name", "Value": "pc"}]}
        ]
        made = ec2.run_instances(
            ImageId=image, MinCount=2, MaxCount=2, InstanceType="p4d.24xlarge", TagSpecifications=tags
        )["Instances"]
        other = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="p4d.24xlarge")[
            "Instances"
        ][0]
        first, second = made
        ip = second["PrivateIpAddress"].replace(".", "-")
        nodes = [
            {"name": "gpu-dy-p4d-1", "address": first["PrivateIpAddress"], "hostname": "gpu-dy-p4d-1"},
            {
                "name": "gpu-dy-p4d-2",
                "address": "gpu-dy-p4d-2",
                "hostname": f"ip-{ip}",
            },  # address in the hostname
            {"name": "gpu-dy-p4d-3", "address": "gpu-dy-p4d-3", "hostname": "gpu-dy-p4d-3"},  # powered down
            {
                "name": "other-1",
                "address": other["PrivateIpAddress"],
                "hostname": "other-1",
            },  # another cluster
            {
                "name": "gpu-st-p5-1",
                "address": "10.9.9.9",
                "instance_id": "i-0123456789abcdef0",
            },  # Slurm 23.11+
        ]
        resolved = Ec2InstanceMap(cluster_name="pc", client=ec2).resolve(nodes)
    assert {name: instance.instance_id for name, instance in resolved.items()} == {
        "gpu-dy-p4d-1": first["InstanceId"],
        "gpu-dy-p4d-2": second["InstanceId"],
        "gpu-st-p5-1": "i-0123456789abcdef0",
    }
    assert resolved["gpu-dy-p4d-1"].instance_type == "p4d.24xlarge"


def test_the_gang_watch_reads_a_slurm_gang_and_applies_fail_through_the_bridge(
    clean: LocalSlurm, bridge: JobRegistry
) -> None:
    from osprey_control.gang import NotOptedInError, WatchJob  # noqa: PLC0415

    # Given a 2-node marked job queued behind a full cluster, and the watch's adapter for it
    blocker = clean.sbatch("-N4", "--exclusive", "-t", "5", wrap="sleep 300")
    clean.wait_state(blocker, "RUNNING")
    job = clean.sbatch("-N2", "--exclusive", "-t", "5", MARK, wrap="sleep 300")
    lambda_client = _InProcessLambda()
    watch_job = WatchJob.model_validate({"backend": "slurm", "nativeId": f"{clean.cluster}/{job}"})
    deployment = Deployment(
        environment={"OSPREY_SLURM_BRIDGE_FUNCTION": "osprey-slurm-bridge"}, clients={"lambda": lambda_client}
    )
    gang = driver_for(Backend.SLURM).gang(watch_job, deployment)
    # Then it reads 0 of 2 workers while pending, 2 of 2 once the nodes free up
    assert (gang.readiness().ready_workers, gang.readiness().requested_workers) == (0, 2)
    clean.run("scancel", str(blocker))
    clean.wait_state(job, "RUNNING")
    assert gang.readiness().ready_workers == 2
    assert not gang.supports_requeue
    # And the fail fallback cancels it through the bridge
    gang.stop()
    assert gang.readiness().finished or job not in clean.squeue_states()
    # And an unmarked job is refused as not opted in (the watch records it), never cancelled
    other = clean.sbatch("-N1", "-t", "5", wrap="sleep 300")
    unmarked = driver_for(Backend.SLURM).gang(
        WatchJob.model_validate({"backend": "slurm", "nativeId": f"{clean.cluster}/{other}"}), deployment
    )
    with pytest.raises(NotOptedInError):
        unmarked.stop()
    assert other in clean.squeue_states()
    # And without a bridge there is no way to reach the cluster: the watch fails at once, saying so
    with pytest.raises(ValueError, match="no Slurm bridge"):
        driver_for(Backend.SLURM).gang(watch_job, Deployment())


def test_discovery_hands_every_changed_record_to_the_gang_starter(
    clean: LocalSlurm, bridge: JobRegistry
) -> None:
    from osprey_control.backends.slurm.bridge import run_discovery  # noqa: PLC0415

    job = clean.sbatch("-N1", "-t", "5", MARK, wrap="sleep 300")
    clean.wait_state(job, "RUNNING")
    started: list[str] = []
    settings = BridgeSettings.model_validate(
        {
            "OSPREY_SLURM_URL": clean.url,
            "OSPREY_SLURM_INSECURE_HTTP": "true",
            "OSPREY_SLURM_CLUSTER": clean.cluster,
            "OSPREY_SLURM_TOKEN_SECRET": "unused",
        }
    )
    connect = lambda cluster: clean.client()  # noqa: E731
    first = run_discovery(
        settings,
        bridge,
        connect=connect,
        instances=Ec2InstanceMap(),
        on_change=lambda r: started.append(r.native_id),
    )
    # (the module's earlier jobs are still known to slurmctld, finished: they are recorded too)
    assert first["recorded"] == len(started) >= 1
    assert str(_key(clean, job).native_id) in started
    before = list(started)
    run_discovery(settings, bridge, connect=connect, on_change=lambda r: started.append(r.native_id))
    assert started == before  # an unchanged job is not handed over again


def test_the_invoke_the_apply_step_makes_is_valid_for_the_lambda_service_model() -> None:
    from botocore.response import StreamingBody  # noqa: PLC0415
    from botocore.stub import ANY, Stubber  # noqa: PLC0415

    from osprey_control.backends import PriorityChange  # noqa: PLC0415
    from osprey_control.registry import JobRecord, JobStatus  # noqa: PLC0415

    # Given a real Lambda client whose requests botocore checks against the service model
    client = boto3.client("lambda", region_name="us-east-1")
    answer = json.dumps(
        {"writes": 1, "results": [{"job": "slurm#pc/7", "outcome": "applied", "priority": 40}]}
    )
    record = JobRecord(
        backend=Backend.SLURM,
        native_id="pc/7",
        name="7",
        block=parse_block({"priority_derivation_profile": "p1"}),
        status=JobStatus.PENDING,
        status_time=datetime.now(UTC),
        cluster="pc",
    )
    with Stubber(client) as stub:
        stub.add_response(
            "invoke",
            {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(answer.encode()), len(answer))},
            {"FunctionName": "Osprey-slurm-pc", "Payload": ANY},
        )
        # When the apply step's Slurm applier invokes the bridge
        report = SlurmBridgeApplier("Osprey-slurm-pc", client=client).apply([PriorityChange(record, 40)])
        stub.assert_no_pending_responses()
    # Then the request was valid and the bridge's answer became the job's result
    assert [(r.job.native_id, r.outcome) for r in report.results] == [("pc/7", Outcome.APPLIED)]
    assert report.writes == 1


def _key(cluster: LocalSlurm, job: int) -> JobKey:
    """The registry key of ``job``: ``<cluster>/<job id>@<submit time>`` (osprey_control.registry.identity)."""
    submitted = next(item["submit_time"] for item in cluster.client().jobs() if item["job_id"] == job)
    return JobKey(Backend.SLURM, f"{cluster.cluster}/{job}@{submitted}")
