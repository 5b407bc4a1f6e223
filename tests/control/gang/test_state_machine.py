"""The real gang watch state machine (synthesized by CDK) executed by moto's Step Functions interpreter, with
the real gang watch Lambda handler running in-process over scripted readiness sequences.

Time is virtual: every Wait state advances the clock the handler reads instead of sleeping, so a 60 s
back-off costs nothing and the waits the state machine took can be asserted exactly.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

from osprey.local.lambdas import InProcessLambdas
from osprey_control.gang import Readiness
from osprey_control.gang.store import GangStore
from osprey_control.registry.model import Backend, JobKey
from osprey_control.registry.table import create_table
from osprey_control.steps.gang_watch import execution_name
from osprey_handlers import gang_watch
from osprey_infra.gang_watch import GangWatchStateMachine
from tests.control.gang.test_watch import ScriptedBackend

REGION, ACCOUNT = "us-east-1", "123456789012"
TABLE = "osprey-gang-sm"
FUNCTION = "osprey-gang-watch"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
KEY = JobKey(Backend.BATCH, "mnp-1")


def _resolve(value: Any, function_arn: str) -> Any:
    """The template's DefinitionString with the watch function's ARN in place of its GetAtt."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_resolve(part, function_arn) for part in parts)
    if "Fn::GetAtt" in value and value["Fn::GetAtt"][1] == "Arn":
        return function_arn
    if "Ref" in value and value["Ref"] == "AWS::Partition":
        return "aws"
    raise AssertionError(f"unexpected token in the gang watch definition: {value}")


@pytest.fixture(scope="module")
def definition_template() -> Any:
    app = cdk.App()
    stack = cdk.Stack(app, "GangWatchTest", env=cdk.Environment(account=ACCOUNT, region=REGION))
    watch = lambda_.Function(
        stack,
        "Watch",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="osprey_handlers.gang_watch.handler",
        code=lambda_.Code.from_inline("placeholder"),
    )
    GangWatchStateMachine(stack, "GangWatch", watch=watch)
    machines = Template.from_stack(stack).find_resources("AWS::StepFunctions::StateMachine")
    (machine,) = machines.values()
    return machine["Properties"]["DefinitionString"]


class Clock:
    def __init__(self) -> None:
        self.now = T0
        self.waits: list[int] = []

    def wait(self, env: Any, wait_seconds: int) -> None:
        """Stands in for moto's WaitFunction._wait_interval (set as a bound method, so no state self)."""
        self.waits.append(wait_seconds)
        self.now += timedelta(seconds=wait_seconds)


@pytest.fixture
def world(
    definition_template: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Any, str, Clock, dict[str, ScriptedBackend]]]:
    clock = Clock()
    backends: dict[str, ScriptedBackend] = {}
    monkeypatch.setattr(WaitFunction, "_wait_interval", clock.wait)
    monkeypatch.setattr(gang_watch, "_now", lambda: clock.now)
    monkeypatch.setattr(gang_watch, "_gang", lambda job: backends[job.native_id])
    monkeypatch.setattr(gang_watch, "publish", lambda points, namespace: len(list(points)))
    config: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
    with mock_aws(config=config):
        create_table(boto3.client("dynamodb", region_name=REGION), TABLE)
        iam = boto3.client("iam", region_name=REGION)
        trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole"}]}
        role = iam.create_role(RoleName="gang", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("placeholder.py", "")
        function_arn = boto3.client("lambda", region_name=REGION).create_function(
            FunctionName=FUNCTION,
            Runtime="python3.13",
            Role=role,
            Handler="osprey_handlers.gang_watch.handler",
            Code={"ZipFile": buffer.getvalue()},
            Environment={"Variables": {"OSPREY_TABLE_NAME": TABLE}},
            Timeout=30,
        )["FunctionArn"]
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = sfn.create_state_machine(
            name="osprey-gang-watch", definition=_resolve(definition_template, function_arn), roleArn=role
        )["stateMachineArn"]
        gang_watch._settings.cache_clear()
        runtime = InProcessLambdas()
        with runtime.installed():
            yield sfn, machine, clock, backends
        runtime.restore_environment()
        gang_watch._settings.cache_clear()


def _run(
    world: tuple[Any, str, Clock, dict[str, ScriptedBackend]], fallback: str, script: list[Readiness]
) -> Any:
    sfn, machine, _, backends = world
    backends[KEY.native_id] = ScriptedBackend(iter(script), supports_requeue=True)
    watch_input = {
        "job": {"backend": KEY.backend.value, "nativeId": KEY.native_id},
        "policy": "training",
        "settings": {"timeoutSeconds": 60, "requiredMinWorkers": 100, "fallback": fallback, "maxRequeues": 2},
    }
    arn = sfn.start_execution(
        stateMachineArn=machine, name=execution_name(KEY), input=json.dumps(watch_input)
    )["executionArn"]
    deadline = time.monotonic() + 60
    while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the gang watch execution did not finish"
        time.sleep(0.05)
    return described


def _gang(world: Any) -> Any:
    return GangStore(TABLE).load(KEY)[0]


def test_ready_in_time(world: Any) -> None:
    described = _run(world, "fail", [Readiness(1, 4), Readiness(2, 4), Readiness(4, 4)])
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["step"]["gang"]["phase"] == "ready"
    assert world[2].waits == [10, 10]
    assert _gang(world).ready_in_time is True


def test_timeout_then_serial(world: Any) -> None:
    described = _run(world, "serial", [Readiness(2, 4)] * 7)
    assert described["status"] == "SUCCEEDED"
    assert _gang(world).phase.value == "serial"
    assert sum(world[2].waits) == 60
    assert world[3][KEY.native_id].actions == []


def test_timeout_then_requeue_then_ready(world: Any) -> None:
    described = _run(world, "requeue", [Readiness(2, 4)] * 7 + [Readiness(4, 4)])
    assert described["status"] == "SUCCEEDED"
    assert world[3][KEY.native_id].actions == ["suspend", "resume"]
    assert world[2].waits[-2:] == [60, 10]  # the back-off, then one poll after resuming
    gang = _gang(world)
    assert (gang.phase.value, gang.attempt, gang.ready_in_time) == ("ready", 2, False)


def test_repeated_timeouts_end_in_fail(world: Any) -> None:
    described = _run(world, "requeue", [Readiness(1, 4)] * 100)
    assert described["status"] == "SUCCEEDED"
    assert world[3][KEY.native_id].actions == ["suspend", "resume", "suspend", "resume", "stop"]
    assert 60 in world[2].waits
    assert 120 in world[2].waits  # the back-off doubled
    assert _gang(world).phase.value == "failed"


def test_a_duplicate_start_runs_no_second_watch(world: Any) -> None:
    sfn, machine, _, _ = world
    first = _run(world, "serial", [Readiness(4, 4)])
    with pytest.raises(sfn.exceptions.ExecutionAlreadyExists):
        sfn.start_execution(stateMachineArn=machine, name=execution_name(KEY), input="{}")
    assert len(sfn.list_executions(stateMachineArn=machine)["executions"]) == 1
    assert first["status"] == "SUCCEEDED"


def test_a_job_that_finishes_while_waiting_ends_the_watch(world: Any) -> None:
    described = _run(world, "fail", [Readiness(1, 4), Readiness(0, 4, finished=True, detail="job SUCCEEDED")])
    assert described["status"] == "SUCCEEDED"
    assert _gang(world).phase.value == "ended"
    assert world[3][KEY.native_id].actions == []


def _run_strict_gang(sfn: Any, machine: str, name: str) -> dict[str, Any]:
    """One watch execution of KEY that needs every worker within 60 s (else fails), run to its end."""
    arn = sfn.start_execution(
        stateMachineArn=machine,
        name=name,
        input=json.dumps(
            {
                "job": {"backend": "batch", "nativeId": KEY.native_id},
                "policy": "training",
                "settings": {"timeoutSeconds": 60, "requiredMinWorkers": 100, "fallback": "fail"},
            }
        ),
    )["executionArn"]
    deadline = time.monotonic() + 60
    while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return dict(described)


def test_a_backend_that_keeps_failing_fails_the_execution_after_retries(world: Any) -> None:
    sfn, machine, _, backends = world

    class Broken(ScriptedBackend):
        def readiness(self) -> Readiness:
            raise RuntimeError("DescribeJobs kept failing")

    backends[KEY.native_id] = Broken(iter([]))
    described = _run_strict_gang(sfn, machine, "broken")
    assert described["status"] == "FAILED"
    assert described["error"] == "Osprey.GangWatchFailed"


def test_a_transient_backend_fault_is_retried_and_the_watch_goes_on(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sfn, machine, _, backends = world
    monkeypatch.setattr(retrier_decl, "time", SimpleNamespace(sleep=lambda _: None))  # the Retry's back-off

    class Throttled(ScriptedBackend):
        """Throttled twice (after botocore's own retries), then all workers are up."""

        def readiness(self) -> Readiness:
            self.actions.append("readiness")
            if len(self.actions) <= 2:
                response: Any = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
                raise ClientError(response, "DescribeJobs")
            return Readiness(4, 4)

    backends[KEY.native_id] = Throttled(iter([]))
    described = _run_strict_gang(sfn, machine, "throttled")
    assert described["status"] == "SUCCEEDED"
    assert backends[KEY.native_id].actions == ["readiness"] * 3
