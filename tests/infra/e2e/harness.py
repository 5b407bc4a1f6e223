"""Run the synthesized cycle state machine in moto's Step Functions interpreter with the real handlers.

:func:`synthesized_template` synthesizes the real app (``infra/app.py``, cdk-nag on). :class:`CycleHarness`
creates the template's resources in moto with every token resolved (:func:`osprey.local.deploy.deploy_template`),
starts executions and waits for them with a bounded poll, and hands back what a user would look at: the status,
the states the execution went through and which functions ran.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
from bench.scale_bench import state_bytes
from moto import mock_aws

from osprey.local.deploy import LocalDeployment, deploy_template, placeholder_zip
from osprey.local.lambdas import InProcessLambdas
from osprey.local.serial import serialized_moto
from osprey.local.service_jobs import ServiceJobs

__all__ = [
    "CycleHarness",
    "Execution",
    "deployed",
    "synthesized_template",
]

REGION = "us-east-1"
# Batch without Docker: moto's container jobs succeed at once instead of leaving threads that retry Docker.
MOTO_CONFIG: Any = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
    "batch": {"use_docker": False},
}
EXECUTION_TIMEOUT_SECONDS = 60.0


def moto_client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)  # type: ignore[call-overload]


def synthesized_template(context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The real app, synthesized with cdk-nag on; ``context`` as ``-c`` would give it."""
    import aws_cdk as cdk  # noqa: PLC0415

    from app import build_app  # noqa: PLC0415 - infra/app.py, on the pytest pythonpath

    app = build_app(cdk.App(context=context)) if context else build_app()
    template: dict[str, Any] = app.synth().get_stack_by_name("Osprey").template
    return template


@dataclass(frozen=True)
class Execution:
    name: str
    status: str
    output: dict[str, Any]
    states: list[str]  # the states entered, in order
    error: str | None = None
    # The largest input or output of each state, in bytes of the history's JSON (what the 256 KiB limit counts).
    state_bytes: dict[str, int] = field(default_factory=dict)


@dataclass
class CycleHarness:
    deployment: LocalDeployment
    service_jobs: ServiceJobs
    runtime: InProcessLambdas
    clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        if service not in self.clients:
            self.clients[service] = moto_client(service)
        return self.clients[service]

    def function(self, role: str) -> str:
        """The deployed function name of a handler module (``derive``, ``lease``, ...)."""
        return self.deployment.function_by_handler(f"osprey_handlers.{role}.handler")

    def deployment_table(self) -> str:
        """The registry table's name, as the functions' environment has it."""
        variables = self.client("lambda").get_function_configuration(FunctionName=self.function("derive"))
        return str(variables["Environment"]["Variables"]["OSPREY_TABLE_NAME"])

    def start(self, name: str, payload: dict[str, Any] | None = None) -> str:
        response = self.client("stepfunctions").start_execution(
            stateMachineArn=self.deployment.state_machine_arn(), name=name, input=json.dumps(payload or {})
        )
        return str(response["executionArn"])

    def wait(self, arn: str, timeout: float = EXECUTION_TIMEOUT_SECONDS) -> Execution:
        sfn = self.client("stepfunctions")
        deadline = time.monotonic() + timeout
        while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
            if time.monotonic() > deadline:
                raise TimeoutError(f"execution {arn} still RUNNING after {timeout} s")
            time.sleep(0.05)
        events = sfn.get_execution_history(executionArn=arn)["events"]
        states = [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
        return Execution(
            name=str(described["name"]),
            status=str(described["status"]),
            output=json.loads(described.get("output") or "{}"),
            states=states,
            error=described.get("error"),
            state_bytes=state_bytes(events),
        )

    def run(self, name: str, payload: dict[str, Any] | None = None) -> Execution:
        return self.wait(self.start(name, payload))

    def create_rule_function(self, name: str, handler: str) -> str:
        """A custom-rule Lambda (the user's own function, not part of the template); returns its ARN."""
        role = next(iter(self.deployment.of_type("AWS::IAM::Role").values())).attributes["Arn"]
        response = self.client("lambda").create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=role,
            Handler=handler,
            Code={"ZipFile": placeholder_zip()},
            Timeout=3,
        )
        return str(response["FunctionArn"])

    def invoked(self) -> list[str]:
        """Which deployed functions ran, by handler role (``lease``, ``derive``, ...) or by name."""
        roles = {
            physical.ref: physical.attributes["Handler"].split(".")[1]
            for physical in self.deployment.of_type("AWS::Lambda::Function").values()
        }
        return [roles.get(name, name) for name, _ in self.runtime.invocations]


@contextmanager
def deployed(template: dict[str, Any]) -> Iterator[CycleHarness]:
    """The template's resources in a fresh moto, with the real handlers answering every Invoke."""
    with mock_aws(config=MOTO_CONFIG):
        deployment = deploy_template(template, moto_client)
        service_jobs = ServiceJobs(region=REGION, account=deployment.account)
        runtime = InProcessLambdas()
        with service_jobs.installed(), serialized_moto(), runtime.installed():
            yield CycleHarness(deployment, service_jobs, runtime)
