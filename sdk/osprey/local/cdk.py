"""``cdk bootstrap`` + ``cdk deploy`` of the real app into the embedded AWS, then make its state machines run.

The CDK CLI (``npx cdk``, pinned in ``package.json``) deploys through moto's CloudFormation when
``AWS_ENDPOINT_URL`` points at the embedded server. moto's CloudFormation creates state machines in its
non-executing Step Functions backend (docs/design.md §9), so :func:`make_executable` re-creates each one, with the
definition CloudFormation resolved and the same name (hence the same ARN, which ``/osprey/config`` publishes), in
the backend that executes definitions. It must run in the server's process: it reads moto's models directly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from osprey_control.wiring import CONFIG_PARAMETER

__all__ = ["CdkDeployError", "cdk_available"]

ACCOUNT = "123456789012"  # moto's default account
CDK_TIMEOUT_SECONDS = 900
ClientFactory = Callable[[str], Any]


class CdkDeployError(RuntimeError):
    """``cdk bootstrap`` or ``cdk deploy`` failed; the message holds the end of its output."""


def cdk_available(repo: Path) -> bool:
    return shutil.which("npx") is not None and (repo / "node_modules" / ".bin" / "cdk").exists()


def cdk_deploy(
    endpoint: str,
    repo: Path,
    output: Path,
    *,
    context: dict[str, Any] | None = None,
    region: str = "us-east-1",
    log: Callable[[str], None] = print,
) -> None:
    """Bootstrap the account and deploy the ``Osprey`` stack (with ``-c`` ``context``) into ``endpoint``."""
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "osprey-local",
        "AWS_SECRET_ACCESS_KEY": "osprey-local",
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "CDK_DISABLE_VERSION_CHECK": "1",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    settings = [item for key, value in (context or {}).items() for item in ("-c", f"{key}={value}")]
    steps = (
        ("bootstrap", f"aws://{ACCOUNT}/{region}"),
        ("deploy", "Osprey", "--require-approval", "never", *settings),
    )
    for step in steps:
        log(f"npx cdk {' '.join(step)} ...")
        command = ["npx", "--no-install", "cdk", *step, "--output", str(output), "--no-notices"]
        done = subprocess.run(
            command,
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=CDK_TIMEOUT_SECONDS,
            check=False,
        )
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
            raise CdkDeployError(f"`npx cdk {step[0]}` failed ({done.returncode}):\n{tail}")


def make_executable(client: ClientFactory, region: str = "us-east-1") -> list[str]:
    """Re-create the CloudFormation-created state machines where moto executes them; returns their ARNs."""
    from moto.stepfunctions.models import stepfunctions_backends  # noqa: PLC0415 - moto is a dev/local dependency

    sfn = client("stepfunctions")
    executable = {machine["stateMachineArn"] for machine in sfn.list_state_machines()["stateMachines"]}
    created: list[str] = []
    machines: list[Any] = list(stepfunctions_backends[ACCOUNT][region].state_machines)
    for machine in machines:
        if machine.arn in executable:
            continue
        arn = sfn.create_state_machine(
            name=machine.name, definition=machine.definition, roleArn=machine.roleArn, type=machine.type
        )["stateMachineArn"]
        created.append(str(arn))
    return created


def published_config(client: ClientFactory) -> dict[str, Any]:
    """``/osprey/config``, where a deployment says where everything is (the SDK and CLI read it too)."""
    value = client("ssm").get_parameter(Name=CONFIG_PARAMETER)["Parameter"]["Value"]
    config: dict[str, Any] = json.loads(value)
    return config
