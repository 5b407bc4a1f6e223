"""Fixtures for the SDK tests: fake credentials, moto, an offline SageMaker session and request capture.

No test here may touch the network: every socket connect is refused and recorded, and a test that tried
one fails at teardown. SageMaker telemetry is opted out through a ``SAGEMAKER_USER_CONFIG_OVERRIDE`` file
(sagemaker 2.257 reads ``SageMaker.PythonSDK.Modules.TelemetryOptOut`` before each decorated call).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from sagemaker.session import Session

REGION = "us-east-1"
ACCOUNT = "123456789012"
BUCKET = "test-training-artifacts"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole"

_SAGEMAKER_CONFIG = """\
SchemaVersion: '1.0'
SageMaker:
  PythonSDK:
    Modules:
      TelemetryOptOut: true
"""


@pytest.fixture(autouse=True)
def offline_aws(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fake credentials and region, SageMaker telemetry off, and no socket may connect."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    config_dir = tmp_path_factory.mktemp("sagemaker-config")
    for variable in ("SAGEMAKER_USER_CONFIG_OVERRIDE", "SAGEMAKER_ADMIN_CONFIG_OVERRIDE"):
        path = config_dir / f"{variable.lower()}.yaml"
        path.write_text(_SAGEMAKER_CONFIG)
        monkeypatch.setenv(variable, str(path))

    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError(f"network access in tests is not allowed: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    yield
    assert not attempts, f"a test tried to reach the network: {attempts}"


class AwsCalls:
    """Every API call made through the boto3 session, and the CreateTrainingJob requests."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.create_training_job: list[dict[str, Any]] = []

    def record_call(self, event_name: str, **_: Any) -> None:
        # before-call.<service>.<Operation>
        _event, service, operation = event_name.split(".", 2)
        self.calls.append(f"{service}.{operation}")

    def record_training_job(self, params: dict[str, Any], **_: Any) -> None:
        self.create_training_job.append(params)


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def aws_calls() -> AwsCalls:
    return AwsCalls()


@pytest.fixture
def boto_session(aws: None, aws_calls: AwsCalls) -> boto3.Session:
    session = boto3.Session(region_name=REGION)
    # Handlers on the session are copied into every client created from it afterwards.
    session.events.register("before-call.*.*", aws_calls.record_call)
    session.events.register(
        "provide-client-params.sagemaker.CreateTrainingJob", aws_calls.record_training_job
    )
    session.client("s3").create_bucket(Bucket=BUCKET)
    return session


@pytest.fixture
def sagemaker_session(boto_session: boto3.Session, aws_calls: AwsCalls) -> Any:
    session = Session(boto_session=boto_session, default_bucket=BUCKET)
    aws_calls.calls.clear()
    return session


@pytest.fixture
def training_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``train.py`` in the working directory, as the seed's ``entry_point="train.py"`` expects."""
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    return script
