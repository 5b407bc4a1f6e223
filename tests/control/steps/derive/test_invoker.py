"""Given custom rules naming Lambda functions, when the derive step invokes them, then only allowed functions
are called, each within its timeout, and every failure kind maps to the fallback with its reason."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from osprey_control.custom_rules import LambdaRuleInvoker, RuleAllowList
from osprey_control.derivation import CustomRuleCall, CustomRuleError, FailureReason

ACCOUNT = "123456789012"
ALLOWED = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:osprey-rule-spot"
EVENT = {"version": "1", "policy": "p", "job": {"id": "j"}, "current_priority": 50, "base_priority": None}


def _call(arn: str = ALLOWED, timeout_ms: int = 1000) -> CustomRuleCall:
    return CustomRuleCall("p", 3, arn, timeout_ms, EVENT)


def _payload(document: Any) -> StreamingBody:
    raw = json.dumps(document).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


@pytest.fixture
def lambda_client() -> Any:
    return boto3.client("lambda", region_name="us-east-1")


@pytest.mark.parametrize(
    ("arn", "fragment"),
    [
        (f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:team-rule", "must start with 'osprey-rule-'"),
        ("arn:aws:lambda:us-east-1:999999999999:function:osprey-rule", "only functions in 123456789012"),
        (f"arn:aws-cn:lambda:cn-north-1:{ACCOUNT}:function:osprey-rule", "partition aws-cn"),
    ],
)
def test_functions_outside_the_allow_list_are_never_invoked(
    lambda_client: Any, arn: str, fragment: str
) -> None:
    invoker = LambdaRuleInvoker(RuleAllowList(ACCOUNT), client=lambda_client)
    with Stubber(lambda_client) as stub:  # no response queued: any call would fail the test
        with pytest.raises(CustomRuleError) as raised:
            invoker.invoke(_call(arn))
        stub.assert_no_pending_responses()
    assert raised.value.reason is FailureReason.NOT_ALLOWED
    assert fragment in raised.value.detail


def test_answer_is_returned_for_the_engine_to_parse(lambda_client: Any) -> None:
    invoker = LambdaRuleInvoker(RuleAllowList(ACCOUNT), client=lambda_client)
    with Stubber(lambda_client) as stub:
        stub.add_response(
            "invoke",
            {"StatusCode": 200, "Payload": _payload({"derived_priority": 61})},
            {
                "FunctionName": ALLOWED,
                "InvocationType": "RequestResponse",
                "Payload": json.dumps(EVENT).encode(),
            },
        )
        assert json.loads(invoker.invoke(_call())) == {"derived_priority": 61}


def test_function_error_is_an_error(lambda_client: Any) -> None:
    invoker = LambdaRuleInvoker(RuleAllowList(ACCOUNT), client=lambda_client)
    with Stubber(lambda_client) as stub:
        stub.add_response(
            "invoke",
            {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": _payload({"errorMessage": "boom"})},
        )
        with pytest.raises(CustomRuleError) as raised:
            invoker.invoke(_call())
    assert raised.value.reason is FailureReason.ERROR


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("TooManyRequestsException", FailureReason.THROTTLED),
        ("ResourceNotFoundException", FailureReason.ERROR),
        ("ServiceException", FailureReason.ERROR),
    ],
)
def test_invoke_errors_map_to_reasons(lambda_client: Any, code: str, reason: FailureReason) -> None:
    invoker = LambdaRuleInvoker(RuleAllowList(ACCOUNT), client=lambda_client)
    with Stubber(lambda_client) as stub:
        stub.add_client_error("invoke", service_error_code=code, http_status_code=429)
        with pytest.raises(CustomRuleError) as raised:
            invoker.invoke(_call())
    assert raised.value.reason is reason


class _SlowClient:
    def invoke(self, **_: Any) -> dict[str, Any]:
        time.sleep(0.5)
        return {"StatusCode": 200, "Payload": _payload({"derived_priority": 1})}


def test_an_answer_later_than_the_rule_timeout_is_a_timeout() -> None:
    invoker = LambdaRuleInvoker(RuleAllowList(ACCOUNT), client=_SlowClient())
    started = time.monotonic()
    with pytest.raises(CustomRuleError) as raised:
        invoker.invoke(_call(timeout_ms=50))
    assert raised.value.reason is FailureReason.TIMEOUT
    assert time.monotonic() - started < 0.4
    invoker.close()
