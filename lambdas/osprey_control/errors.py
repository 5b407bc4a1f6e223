"""Permanent versus transient failures: the one place that says whether a failure is worth retrying.

kopf's model (``PermanentError`` / ``TemporaryError``): the exception's type decides. Adapters, the code that
calls boto3 or the Kubernetes API, raise a :class:`TransientError` or a :class:`PermanentError`, or translate
what the SDK raised with :func:`classified` / :func:`classify`. Callers decide with ``except TransientError`` /
``except PermanentError`` or :func:`is_transient`, never by an exception's name.

=========================================================  ===========================================
failure                                                    class
=========================================================  ===========================================
AWS throttling (``_THROTTLING_CODES``)                     :class:`ThrottledError` (a TransientError)
AWS 5xx, a request timeout, a transaction cancelled by a   :class:`TransientError`
concurrent one; no connection, connect or read timeout
(botocore's or the standard library's)
any other AWS 4xx (validation, access denied, not found);  :class:`PermanentError`, reason ``rejected``
a request botocore refuses to send (parameter validation)
anything else (a bug, missing credentials)                 unclassified: the caller's documented default
=========================================================  ===========================================

Nothing here imports boto3 or botocore at module load (cold starts); botocore is imported on the error path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "ERROR_CHARS",
    "FAILURE_SAMPLE",
    "REJECTED",
    "PermanentError",
    "ThrottledError",
    "TransientError",
    "aws_error_code",
    "classified",
    "classify",
    "condition_failed",
    "is_throttling",
    "is_transient",
]

# What a step or a backend function returns to its caller (a state machine, the apply step) carries at most
# FAILURE_SAMPLE failures, each error cut to ERROR_CHARS, next to their count: enough to see what failed in the
# execution's history, and a size that does not grow with the fleet (docs/control-plane.md, Payload). Every
# failure is logged. Re-exported by osprey_control.steps.payload, which holds the rest of the payload contract.
FAILURE_SAMPLE = 5
ERROR_CHARS = 300

# The reason of a PermanentError made from an AWS refusal (ingest counts drops by reason; keep the set small).
REJECTED = "rejected"

_THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "RequestThrottled",
        "SlowDown",
        "BandwidthLimitExceeded",
        "EC2ThrottledException",
    }
)
# 4xx codes that botocore's standard retry mode also treats as transient: the request itself was fine.
_TRANSIENT_CODES = frozenset(
    {"RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete", "TransactionInProgressException"}
)
# Why DynamoDB cancels a transaction when the items were fine and another writer or the capacity was not.
_TRANSIENT_CANCELLATIONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)


class TransientError(Exception):
    """Worth retrying later: the same request may succeed once the service, the network or a concurrent
    writer lets it (kopf's ``TemporaryError``)."""


class ThrottledError(TransientError):
    """The service asked the caller to slow down (a transient failure that is also a signal of load)."""


class PermanentError(Exception):
    """Retrying the same request cannot help: the input, the request or the deployment must change first.

    ``reason`` is a short, stable code for logs and metric dimensions (few distinct values: each is billed as a
    custom metric where it is counted); the message says what to fix.
    """

    def __init__(self, message: str = "", *, reason: str = "permanent") -> None:
        super().__init__(message)
        self.reason = reason


def _response(error: BaseException) -> dict[str, Any]:
    response = getattr(error, "response", None)
    return response if isinstance(response, dict) else {}


def aws_error_code(error: BaseException) -> str:
    """The AWS error code of a botocore ClientError (``ConditionalCheckFailedException``, ...); "" otherwise."""
    return str(_response(error).get("Error", {}).get("Code", ""))


def condition_failed(error: BaseException) -> bool:
    """Whether ``error`` is DynamoDB refusing a conditional write (the condition was false, not a fault)."""
    return aws_error_code(error) == "ConditionalCheckFailedException"


def _classify_client_error(error: BaseException) -> TransientError | PermanentError:
    response = _response(error)
    code = aws_error_code(error)
    message = str(response.get("Error", {}).get("Message", "")) or str(error)
    operation = getattr(error, "operation_name", None) or "the AWS call"
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    text = f"{operation}: {code}: {message}"
    if code in _THROTTLING_CODES:
        return ThrottledError(f"{text} (throttled; retried later)")
    if code == "TransactionCanceledException":
        reasons = {str(reason.get("Code")) for reason in response.get("CancellationReasons") or []}
        if reasons & _TRANSIENT_CANCELLATIONS:
            return TransientError(f"{text} (a concurrent write or capacity; retried later)")
    if code in _TRANSIENT_CODES or (isinstance(status, int) and status >= 500):
        return TransientError(f"{text} (a service-side failure; retried later)")
    return PermanentError(
        f"{text}. AWS refused the request itself, so repeating it cannot succeed: fix the input it was made "
        "from, or grant the function's role the permission it names",
        reason=REJECTED,
    )


def classify(error: BaseException) -> TransientError | PermanentError | None:
    """``error`` in the taxonomy: itself if it already is a TransientError / PermanentError, a new one
    describing it for AWS and connection failures, None when this module does not know (a bug, most likely)."""
    if isinstance(error, TransientError | PermanentError):
        return error
    if isinstance(error, ConnectionError | TimeoutError):
        return TransientError(f"{type(error).__name__}: {error} (no answer; retried later)")
    from botocore import exceptions as botocore  # noqa: PLC0415 - only on the error path

    if isinstance(error, botocore.ClientError):
        return _classify_client_error(error)
    if isinstance(error, botocore.ConnectionError | botocore.HTTPClientError):
        return TransientError(f"{type(error).__name__}: {error} (no answer; retried later)")
    if isinstance(error, botocore.ParamValidationError):
        return PermanentError(f"the request is invalid before it is sent: {error}", reason=REJECTED)
    return None


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` is classified transient (unclassified errors are not)."""
    return isinstance(classify(error), TransientError)


def is_throttling(error: BaseException) -> bool:
    return isinstance(classify(error), ThrottledError)


@contextmanager
def classified() -> Iterator[None]:
    """Re-raise what the block raises as a TransientError / PermanentError chained to the original, when
    :func:`classify` knows it; anything else propagates unchanged. Wrap the SDK calls of an adapter in it."""
    try:
        yield
    except Exception as error:
        result = classify(error)
        if result is None or result is error:
            raise
        raise result from error
