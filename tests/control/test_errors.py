"""Given failures as botocore, the standard library and Osprey raise them, when classified
(osprey_control.errors), then the type says whether to retry: throttling, 5xx, lost races and no connection are
transient, AWS refusals are permanent with a message that says what to fix, and a name alone decides nothing."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ParamValidationError,
    ReadTimeoutError,
)

from osprey_control import aws
from osprey_control.errors import (
    REJECTED,
    PermanentError,
    ThrottledError,
    TransientError,
    classified,
    classify,
    is_throttling,
    is_transient,
)


def _client_error(code: str, status: int = 400, **response: Any) -> ClientError:
    body: Any = {
        "Error": {"Code": code, "Message": "the message"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    body.update(response)
    return ClientError(body, "PutItem")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (_client_error("ThrottlingException"), ThrottledError),
        (_client_error("ProvisionedThroughputExceededException"), ThrottledError),
        (_client_error("TooManyRequestsException", 429), ThrottledError),
        (_client_error("InternalServerError", 500), TransientError),
        (_client_error("ServiceUnavailable", 503), TransientError),
        (_client_error("RequestTimeout"), TransientError),
        (
            _client_error(
                "TransactionCanceledException", CancellationReasons=[{"Code": "TransactionConflict"}]
            ),
            TransientError,
        ),
        (
            _client_error(
                "TransactionCanceledException", CancellationReasons=[{"Code": "ConditionalCheckFailed"}]
            ),
            PermanentError,
        ),
        (_client_error("ValidationException"), PermanentError),
        (_client_error("AccessDeniedException", 403), PermanentError),
        (_client_error("ResourceNotFoundException"), PermanentError),
        (EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"), TransientError),
        (ConnectTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"), TransientError),
        (ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"), TransientError),
        (ConnectionResetError("reset by peer"), TransientError),
        (TimeoutError("timed out"), TransientError),
        (ParamValidationError(report="TrainingJobName is too long"), PermanentError),
    ],
)
def test_aws_and_connection_failures_are_classified(error: BaseException, expected: type[Exception]) -> None:
    result = classify(error)
    assert type(result) is expected
    assert is_transient(error) is issubclass(expected, TransientError)
    assert is_throttling(error) is (expected is ThrottledError)


def test_a_refusal_is_permanent_and_says_what_to_fix() -> None:
    result = classify(_client_error("AccessDeniedException", 403))
    assert isinstance(result, PermanentError)
    assert result.reason == REJECTED
    assert "PutItem: AccessDeniedException: the message" in str(result)
    assert "grant the function's role" in str(result)


def test_a_class_named_like_a_transient_error_is_not_transient() -> None:
    # Given an exception that only shares its name with botocore's connection error (no name matching)
    class EndpointConnectionError(Exception):
        pass

    assert classify(EndpointConnectionError()) is None
    assert not is_transient(EndpointConnectionError())


def test_unknown_errors_stay_unclassified_and_classified_errors_stay_themselves() -> None:
    assert classify(ValueError("a bug")) is None
    transient, permanent = TransientError("later"), PermanentError("never", reason="malformed")
    assert classify(transient) is transient
    assert classify(permanent) is permanent


def test_classified_reraises_in_the_taxonomy_chained_to_the_original() -> None:
    original = _client_error("ThrottlingException")
    with pytest.raises(ThrottledError) as raised, classified():
        raise original
    assert raised.value.__cause__ is original
    # An unclassified error passes through unchanged
    with pytest.raises(KeyError), classified():
        raise KeyError("a bug")


def test_the_old_names_in_osprey_control_aws_still_answer() -> None:
    assert aws.is_transient(_client_error("SlowDown", 503))
    assert aws.is_throttling(_client_error("Throttling"))
    assert not aws.is_transient(_client_error("ValidationException"))
