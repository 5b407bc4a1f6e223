"""Run Lambda functions registered in moto as their real Python handlers, in this process.

moto's Docker-free Lambda backend answers every ``Invoke`` with a canned payload. Step Functions executions in
moto (and ``osprey local``) need the real handlers, so :class:`InProcessLambdas` replaces that backend's
``invoke``: it looks up the function moto holds (its ``Handler`` string, environment, timeout and memory),
imports the handler and calls it with a Lambda-shaped context. A handler that raises becomes an
``Unhandled`` function error with ``errorType``/``errorMessage``, exactly as the Lambda service reports it,
so Step Functions' ``Retry``/``Catch`` see what they would see in AWS.

The functions share one process, so their environments are merged into ``os.environ`` when the function is
first invoked; two functions that set the same variable to different values are refused with an error
naming both, rather than one silently seeing the other's value.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from osprey.checkout import find_checkout

__all__ = ["InProcessLambdas"]

Handler = Callable[[Any, Any], Any]


class EnvironmentConflictError(RuntimeError):
    """Two functions need different values for one environment variable in a shared process."""


@dataclass(frozen=True)
class LambdaContext:
    """The attributes of the Lambda runtime's context object that handlers (and Powertools) read."""

    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    timeout_seconds: int
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = ""
    started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout_seconds - (time.monotonic() - self.started)) * 1000))


def import_handler(spec: str) -> Handler:
    """``package.module.function`` → the function; ``lambdas/`` is importable as it is in the bundle."""
    module_name, _, attribute = spec.rpartition(".")
    if not module_name:
        raise ValueError(f"Lambda handler {spec!r} must look like 'module.function'")
    lambdas_dir = str(find_checkout() / "lambdas")
    if lambdas_dir not in sys.path:
        sys.path.append(lambdas_dir)
    handler = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(handler):
        raise ValueError(f"Lambda handler {spec!r}: {module_name} has no callable {attribute!r}")
    return handler  # type: ignore[no-any-return]


def clear_handler_caches(packages: tuple[str, ...] = ("osprey_handlers", "osprey_control")) -> int:
    """Forget what imported handlers cached per container (settings, clients, registries); returns how many.

    Handlers, and the backends they reach (an EKS cluster's client, its Kueue version), cache their components
    with ``functools.cache`` as a warm Lambda container would; a new deployment (another table name, a fresh
    moto) in the same process must start cold.
    """
    cleared = 0
    for name, module in list(sys.modules.items()):
        if module is None or not any(
            name == package or name.startswith(f"{package}.") for package in packages
        ):
            continue
        for value in list(vars(module).values()):
            cached = not isinstance(value, type) and callable(getattr(value, "cache_clear", None))
            if cached and getattr(value, "__module__", None) == name:
                value.cache_clear()
                cleared += 1
    return cleared


class InProcessLambdas:
    """Patch moto's simple Lambda backend so ``Invoke`` runs the function's real handler.

    ``handlers`` maps a function name to a callable to use instead of importing its ``Handler`` (for tests
    that script a function; kept in :attr:`overrides`, which may be changed while installed); ``invocations`` records ``(function_name, event)`` in call order.
    """

    def __init__(
        self,
        handlers: Mapping[str, Handler] | None = None,
        *,
        resolve: Callable[[str], Handler] = import_handler,
    ) -> None:
        self.overrides = dict(handlers or {})
        self._resolve = resolve
        self._environment_owner: dict[str, str] = {}
        self._environment_before: dict[str, str | None] = {}
        self._lock = threading.Lock()
        self.invocations: list[tuple[str, Any]] = []
        self._running = 0  # invocations in flight
        self._idle = threading.Condition(self._lock)

    def _adopt_environment(self, function_name: str, variables: Mapping[str, str]) -> None:
        with self._lock:
            for name, value in variables.items():
                owner = self._environment_owner.get(name)
                if owner is not None and owner != function_name and os.environ.get(name) != value:
                    raise EnvironmentConflictError(
                        f"functions {owner!r} and {function_name!r} set {name} to different values "
                        f"({os.environ.get(name)!r} and {value!r}); give them the same value or run them "
                        "in separate processes"
                    )
                self._environment_before.setdefault(name, os.environ.get(name))
                os.environ[name] = value
                self._environment_owner.setdefault(name, function_name)

    def invoke(self, function: Any, body: Any, response_headers: dict[str, str]) -> bytes:
        """Run one invocation of a moto ``LambdaFunction``; the return value is the response payload."""
        name = str(function.function_name)
        text = body.decode() if isinstance(body, bytes) else (body or "")
        event = json.loads(text) if text.strip() else {}
        with self._lock:
            self.invocations.append((name, event))
            self._running += 1
        try:
            return self._run(function, name, event, response_headers)
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no invocation is in flight (True), or ``timeout`` seconds (False)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout=timeout)

    def _run(self, function: Any, name: str, event: Any, response_headers: dict[str, str]) -> bytes:
        context = LambdaContext(
            function_name=name,
            invoked_function_arn=str(function.function_arn),
            memory_limit_in_mb=int(function.memory_size),
            timeout_seconds=int(function.timeout),
            log_group_name=f"/aws/lambda/{name}",
        )
        try:
            self._adopt_environment(name, dict(function.environment_vars or {}))
            handler = self.overrides.get(name) or self._resolve(str(function.handler))
            result = handler(event, context)
            return json.dumps(result, default=str).encode()
        except Exception as error:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(
                {
                    "errorType": type(error).__name__,
                    "errorMessage": str(error),
                    "stackTrace": traceback.format_exception(error)[-5:],
                }
            ).encode()

    def restore_environment(self) -> None:
        """Put back the ``os.environ`` values the functions' environments replaced (or remove them)."""
        with self._lock:
            for name, value in self._environment_before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self._environment_before.clear()
            self._environment_owner.clear()

    @contextmanager
    def installed(self) -> Iterator[InProcessLambdas]:
        """Replace ``LambdaSimpleBackend.invoke`` for the duration of the block (use with
        ``mock_aws(config={"lambda": {"use_docker": False}})`` or a moto server configured the same way).

        On exit the process environment is restored, so one block's functions do not leak into the next."""
        from moto.awslambda_simple.models import LambdaSimpleBackend  # noqa: PLC0415 - moto is a dev/local dependency

        runtime = self

        def invoke(  # noqa: PLR0917 - moto's signature
            backend: Any,
            function_name: str,
            qualifier: str | None,
            body: Any,
            headers: Any,
            response_headers: Any,
        ) -> bytes:
            function = backend.get_function(function_name, qualifier)
            return runtime.invoke(function, body, response_headers)

        original = LambdaSimpleBackend.invoke
        LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign,assignment]
        clear_handler_caches()
        try:
            yield self
        finally:
            LambdaSimpleBackend.invoke = original  # type: ignore[method-assign]
            self.restore_environment()
            clear_handler_caches()
