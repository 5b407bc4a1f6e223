"""An embedded AWS (moto server) on localhost whose Lambda functions are the real Osprey handlers.

:class:`LocalAws` runs moto's server in a thread of this process, configured as docs/design.md §9 requires (Step
Functions executes definitions, Lambda and Batch without Docker), with three things in front of it:

- :class:`osprey.local.lambdas.InProcessLambdas`: ``Invoke`` runs the function's real handler in this process;
  the handlers reach the server through ``AWS_ENDPOINT_URL``;
- :class:`osprey.local.service_jobs.ServiceJobs`: Batch service jobs, which moto lacks;
- a lock around every request except Lambda invocations, since moto's backends are not thread-safe
  (:mod:`osprey.local.serial`).

Any process can then use the endpoint (``AWS_ENDPOINT_URL=http://localhost:PORT``), e.g. ``osprey local cycle``.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from typing import Any
from unittest import mock

from osprey.local.lambdas import InProcessLambdas
from osprey.local.serial import is_lambda_invocation
from osprey.local.service_jobs import ServiceJobs

__all__ = ["DEFAULT_PORT", "LocalAws", "endpoint_client"]

DEFAULT_PORT = 4599
STOP_GRACE_SECONDS = 15.0
REGION = "us-east-1"
MOTO_CONFIG: dict[str, Any] = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
    "batch": {"use_docker": False},
}
# What the in-process handlers (and moto's Step Functions interpreter, via MOTO_PORT) need to find the server.
_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "osprey-local", "AWS_SECRET_ACCESS_KEY": "osprey-local"}

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return int(probe.getsockname()[1])


def endpoint_client(service: str, endpoint: str, region: str = REGION) -> Any:
    """A boto3 client for the embedded AWS (fake credentials: moto accepts any)."""
    import boto3  # noqa: PLC0415 - the CLI imports this module for every command

    return boto3.client(  # type: ignore[call-overload]
        service, endpoint_url=endpoint, region_name=region, **{k.lower(): v for k, v in _CREDENTIALS.items()}
    )


def _front(app: WsgiApp, service_jobs: ServiceJobs, lock: threading.RLock) -> WsgiApp:
    """Service jobs answered here; every other request but Lambda invocations dispatched under ``lock``."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method, path = str(environ.get("REQUEST_METHOD", "")), str(environ.get("PATH_INFO", ""))
        if service_jobs.handles(method, path):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            status, headers, body = service_jobs.handle_path(path, environ["wsgi.input"].read(length))
            reason = "OK" if status == 200 else "Bad Request"
            start_response(f"{status} {reason}", [("Content-Type", "application/json"), *headers.items()])
            return [body.encode()]
        if is_lambda_invocation(f"http://lambda.local{path}"):
            return app(environ, start_response)
        with lock:
            # Consume the response inside the lock: moto may build it lazily.
            return list(app(environ, start_response))

    return wsgi


class LocalAws:
    """moto server on ``localhost:port`` with the real handlers (see the module docstring)."""

    def __init__(self, port: int = DEFAULT_PORT, runtime: InProcessLambdas | None = None) -> None:
        self.port = port
        self.runtime = runtime or InProcessLambdas()
        self.service_jobs = ServiceJobs(region=REGION)
        self.region = REGION
        self.kubernetes: Any = None  # the EKS cluster's API server, when the deployment has one
        self._stack = ExitStack()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        # localhost, not 127.0.0.1: moto derives some URLs (SQS queue URLs) from the Host header (docs/design.md §9).
        return f"http://localhost:{self.port}"

    def client(self, service: str) -> Any:
        return endpoint_client(service, self.endpoint)

    def start(self) -> LocalAws:
        from moto.core.base_backend import BackendDict  # noqa: PLC0415 - moto is a dev/local dependency
        from moto.core.config import default_user_config  # noqa: PLC0415
        from moto.moto_server.werkzeug_app import (  # noqa: PLC0415
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server  # noqa: PLC0415

        environment = {
            **_CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "MOTO_PORT": str(self.port),
        }
        self._stack.enter_context(mock.patch.dict(os.environ, environment))
        self._stack.enter_context(mock.patch.dict(default_user_config, MOTO_CONFIG))
        self._stack.enter_context(self.runtime.installed())
        BackendDict.reset()  # a fresh AWS, whatever this process held before (tests, a previous `up`)

        class QuietHandler(MotoRequestHandler):
            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                """One line per AWS call would drown the CLI's output; errors are still logged."""

        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server(
            "localhost",
            self.port,
            _front(app, self.service_jobs, threading.RLock()),
            threaded=True,
            request_handler=QuietHandler,
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="osprey-local-aws", daemon=True
        )
        self._thread.start()
        return self

    def stop_executions(self) -> int:
        """Stop every running Step Functions execution (the gang watches wait real seconds in moto's threads,
        which would otherwise call the server after it is gone); returns how many were stopped."""
        if self._server is None:
            return 0
        sfn = self.client("stepfunctions")
        stopped = 0
        for machine in sfn.list_state_machines()["stateMachines"]:
            pages = sfn.get_paginator("list_executions").paginate(
                stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING"
            )
            for execution in (item for page in pages for item in page["executions"]):
                sfn.stop_execution(executionArn=execution["executionArn"], cause="osprey local is stopping")
                stopped += 1
        return stopped

    def stop(self) -> None:
        if self._server is not None:
            self.stop_executions()
            # A watch step already running finishes against a live server and Kubernetes API (a second or so).
            self.runtime.wait_idle(timeout=STOP_GRACE_SECONDS)
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None
        if self.kubernetes is not None:
            self.kubernetes.stop()
            self.kubernetes = None
        self._stack.close()

    def __enter__(self) -> LocalAws:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
