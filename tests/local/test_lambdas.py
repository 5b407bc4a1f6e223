"""InProcessLambdas: moto's Invoke runs the function's real handler, with its environment and a context."""

from __future__ import annotations

import io
import json
import os
import threading
import time
import zipfile
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey.local.lambdas import (
    EnvironmentConflictError,
    InProcessLambdas,
    clear_handler_caches,
    import_handler,
)

TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("placeholder.py", "")
    return buffer.getvalue()


def echo_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {
        "event": event,
        "function": context.function_name,
        "table": os.environ.get("OSPREY_TABLE_NAME"),
        "remaining_positive": context.get_remaining_time_in_millis() > 0,
    }


def failing_handler(event: dict[str, Any], context: Any) -> None:
    raise ValueError("shard 3 is not a number")


@pytest.fixture
def lambda_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("OSPREY_TABLE_NAME", raising=False)
    with mock_aws(config={"lambda": {"use_docker": False}}):
        iam = boto3.client("iam", region_name="us-east-1")
        iam.create_role(RoleName="osprey-test", AssumeRolePolicyDocument=json.dumps(TRUST))
        yield boto3.client("lambda", region_name="us-east-1")


def _create(client: Any, name: str, handler: str, env: dict[str, str]) -> None:
    client.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role="arn:aws:iam::123456789012:role/osprey-test",
        Handler=handler,
        Code={"ZipFile": _zip()},
        Environment={"Variables": env},
        Timeout=30,
    )


def test_given_a_function_when_invoked_then_its_real_handler_runs_with_env_and_context(
    lambda_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a function whose Handler names a module function
    _create(
        lambda_client, "osprey-echo", "tests.local.test_lambdas.echo_handler", {"OSPREY_TABLE_NAME": "jobs"}
    )
    runtime = InProcessLambdas()
    # When it is invoked through the Lambda API
    with runtime.installed():
        response = lambda_client.invoke(FunctionName="osprey-echo", Payload=json.dumps({"shard": 3}))
    monkeypatch.delenv("OSPREY_TABLE_NAME", raising=False)
    # Then the handler's answer comes back, having seen the function's environment and a context
    assert "FunctionError" not in response
    assert json.loads(response["Payload"].read()) == {
        "event": {"shard": 3},
        "function": "osprey-echo",
        "table": "jobs",
        "remaining_positive": True,
    }
    assert runtime.invocations == [("osprey-echo", {"shard": 3})]


def test_given_a_handler_that_raises_when_invoked_then_lambda_reports_an_unhandled_error(
    lambda_client: Any,
) -> None:
    _create(lambda_client, "osprey-fail", "tests.local.test_lambdas.failing_handler", {})
    with InProcessLambdas().installed():
        response = lambda_client.invoke(FunctionName="osprey-fail", Payload=b"{}")
    assert response["FunctionError"] == "Unhandled"
    payload = json.loads(response["Payload"].read())
    assert payload["errorType"] == "ValueError"
    assert payload["errorMessage"] == "shard 3 is not a number"


def test_given_two_functions_with_conflicting_env_when_both_run_then_the_second_is_refused(
    lambda_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _create(lambda_client, "osprey-a", "tests.local.test_lambdas.echo_handler", {"OSPREY_TABLE_NAME": "a"})
    _create(lambda_client, "osprey-b", "tests.local.test_lambdas.echo_handler", {"OSPREY_TABLE_NAME": "b"})
    with InProcessLambdas().installed():
        first = lambda_client.invoke(FunctionName="osprey-a", Payload=b"{}")
        second = lambda_client.invoke(FunctionName="osprey-b", Payload=b"{}")
    monkeypatch.delenv("OSPREY_TABLE_NAME", raising=False)
    assert "FunctionError" not in first
    assert second["FunctionError"] == "Unhandled"
    payload = json.loads(second["Payload"].read())
    assert payload["errorType"] == EnvironmentConflictError.__name__
    assert "OSPREY_TABLE_NAME" in payload["errorMessage"]


def test_given_a_malformed_handler_string_then_the_error_says_what_is_expected() -> None:
    with pytest.raises(ValueError, match=r"must look like 'module\.function'"):
        import_handler("handler")
    with pytest.raises(ValueError, match="no callable 'nope'"):
        import_handler("tests.local.test_lambdas.nope")


def test_given_an_installed_runtime_when_it_exits_then_the_process_environment_is_restored(
    lambda_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a variable the test process already has, which a function's environment replaces
    monkeypatch.setenv("OSPREY_METRICS_NAMESPACE", "mine")
    _create(
        lambda_client,
        "osprey-env",
        "tests.local.test_lambdas.echo_handler",
        {"OSPREY_TABLE_NAME": "jobs", "OSPREY_METRICS_NAMESPACE": "/aws/osprey"},
    )
    with InProcessLambdas().installed():
        response = lambda_client.invoke(FunctionName="osprey-env", Payload=b"{}")
        assert json.loads(response["Payload"].read())["table"] == "jobs"
        assert os.environ["OSPREY_METRICS_NAMESPACE"] == "/aws/osprey"
    # Then after the block the process sees its own values again, and nothing the function added
    assert os.environ["OSPREY_METRICS_NAMESPACE"] == "mine"
    assert "OSPREY_TABLE_NAME" not in os.environ


RELEASE = threading.Event()


def blocking_handler(event: dict[str, Any], context: Any) -> str:
    RELEASE.wait(timeout=10)
    return "done"


def test_given_an_invocation_in_flight_when_stopping_then_wait_idle_waits_for_it(lambda_client: Any) -> None:
    # Given an invocation that runs until released (a gang watch step, when `osprey local` stops)
    _create(lambda_client, "osprey-block", "tests.local.test_lambdas.blocking_handler", {})
    RELEASE.clear()
    runtime = InProcessLambdas()
    with runtime.installed():
        caller = threading.Thread(
            target=lambda: lambda_client.invoke(FunctionName="osprey-block", Payload=b"{}"), daemon=True
        )
        caller.start()
        deadline = time.monotonic() + 10
        while not runtime.invocations:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # When the runtime is asked to be idle, it is not while the invocation runs ...
        assert runtime.wait_idle(timeout=0.2) is False
        # ... and is once it returned
        RELEASE.set()
        assert runtime.wait_idle(timeout=10) is True
        caller.join(timeout=10)


def test_a_redeployment_forgets_the_eks_discovery_clients() -> None:
    # Given the discovery handler with a client cached for a cluster of an earlier deployment
    from osprey_handlers import eks_discovery  # noqa: PLC0415 - a Lambda module, imported as the runtime would

    eks_discovery._cached_connect._clients["gpu"] = object()  # type: ignore[assignment]
    # When a new deployment in this process resets the handlers' caches
    clear_handler_caches()
    # Then the next discovery connects afresh instead of reusing the old cluster's endpoint
    assert eks_discovery._cached_connect._clients == {}
