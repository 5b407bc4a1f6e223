"""Custom rules through AWS Lambda: the allow-list of docs/design.md §4, the rule's timeout, and failure reasons.

The control plane may invoke only functions in its own account whose name starts with the deployment's
prefix (default ``osprey-rule-``; :class:`~osprey_control.policy.rule_access.RuleAllowList`, the same check
``cdk synth`` and ``osprey policy validate`` make); IAM denies the rest anyway, but checking first gives a
clear reason (``not-allowed``) instead of an AccessDenied per cycle.

Each call is one attempt bounded by the rule's ``timeoutMs``: the Lambda client's read timeout is the rule's
timeout and botocore does not retry (a retry would only spend the cycle's time on a rule that already failed
to answer; the rule's ``fallbackPriority`` stands in and the next cycle asks again).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from botocore.config import Config
from botocore.exceptions import ReadTimeoutError

from osprey_control.derivation import CustomRuleCall, CustomRuleError, FailureReason
from osprey_control.errors import is_throttling
from osprey_control.policy import DEFAULT_ALLOWED_PREFIX, RuleAllowList

__all__ = ["DEFAULT_ALLOWED_PREFIX", "LambdaRuleInvoker", "RuleAllowList"]

_MAX_CONNECT_SECONDS = 2.0  # the regional Lambda endpoint; more than this is an outage, not a slow rule


def rule_client_config(timeout_ms: int) -> Config:
    """The Lambda client for rules with ``timeout_ms``: read timeout = the rule's timeout, one attempt only
    (``total_max_attempts`` counts the first request; botocore's ``max_attempts`` would count retries)."""
    seconds = timeout_ms / 1000
    return Config(
        connect_timeout=min(_MAX_CONNECT_SECONDS, seconds),
        read_timeout=seconds,
        retries={"mode": "standard", "total_max_attempts": 1},
    )


class LambdaRuleInvoker:
    """Implements the engine's ``CustomRuleInvoker`` with ``lambda:Invoke`` (RequestResponse).

    The rule's ``timeoutMs`` bounds the wait: the call runs on a worker thread and an answer later than that is
    a ``timeout`` (the function may still finish; its answer is ignored). The client's read timeout is the same,
    so the worker thread is freed too. Thread-safe, so a shard's jobs can be derived concurrently and their
    custom rules run in parallel (how many per rule is the derive step's bulkhead).

    ``client`` (tests) serves every call; without one, a client per distinct ``timeoutMs`` is created on first
    use with :func:`rule_client_config`.
    """

    def __init__(self, allow: RuleAllowList, *, client: Any = None, max_concurrency: int = 64) -> None:
        self._allow = allow
        self._client = client
        self._clients: dict[int, Any] = {}
        self._clients_lock = threading.Lock()  # creating boto3 clients is not thread-safe
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="osprey-rule")

    def client_for_timeout(self, timeout_ms: int) -> Any:
        """The Lambda client that calls rules with ``timeout_ms`` (the injected one, if any)."""
        if self._client is not None:
            return self._client
        with self._clients_lock:
            client = self._clients.get(timeout_ms)
            if client is None:
                import boto3  # noqa: PLC0415 - created on first use, like osprey_control.aws.client_for

                client = boto3.client("lambda", config=rule_client_config(timeout_ms))
                self._clients[timeout_ms] = client
            return client

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _invoke(self, call: CustomRuleCall) -> Any:
        try:
            response = self.client_for_timeout(call.timeout_ms).invoke(
                FunctionName=call.arn,
                InvocationType="RequestResponse",
                Payload=json.dumps(call.event).encode(),
            )
        except ReadTimeoutError:
            raise CustomRuleError(FailureReason.TIMEOUT, f"no answer within {call.timeout_ms} ms") from None
        except Exception as error:
            if is_throttling(error):
                raise CustomRuleError(FailureReason.THROTTLED, str(error)) from None
            raise CustomRuleError(FailureReason.ERROR, f"{type(error).__name__}: {error}") from None
        payload = response["Payload"].read()
        if response.get("FunctionError"):
            # The function raised: its payload is the error, not an answer.
            raise CustomRuleError(FailureReason.ERROR, f"function error: {payload[:200]!r}")
        return payload

    def invoke(self, call: CustomRuleCall) -> Any:
        problem = self._allow.problem(call.arn)
        if problem is not None:
            raise CustomRuleError(FailureReason.NOT_ALLOWED, problem)
        future = self._pool.submit(self._invoke, call)
        try:
            return future.result(timeout=call.timeout_ms / 1000)
        except FutureTimeout:
            future.cancel()
            raise CustomRuleError(FailureReason.TIMEOUT, f"no answer within {call.timeout_ms} ms") from None
