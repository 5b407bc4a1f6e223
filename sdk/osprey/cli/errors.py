"""The one error guard of the ``osprey`` CLI: what a user error or a missing setup raises, as one line saying
what to set (:func:`describe_error`), printed as ``error: ...`` with exit 1 (:func:`guarded`), or exit 2 for a
:class:`UsageError` (the command line itself is wrong; docs/cli.md, Exit codes).

Covered: :class:`TargetError` (no deployment found, a job that is not there), botocore's NoRegionError,
NoCredentialsError, PartialCredentialsError, ProfileNotFound, SSO/token retrieval failures, an unreachable or
silent endpoint, a request botocore refuses, and AWS refusals (access denied, expired or invalid credentials,
a missing resource; any other AWS error code as ``<operation> failed: <code>: <message>``). Anything else is a
bug: :func:`describe_error` returns None and the caller (``osprey.cli.main``) prints it as one line with
``run with OSPREY_DEBUG=1 for the traceback``. ``OSPREY_DEBUG=1`` re-raises instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

__all__: list[str] = []

DEBUG_VARIABLE = "OSPREY_DEBUG"


class TargetError(Exception):
    """No deployment could be found, or the one found cannot answer: the message says what to set."""


class UsageError(TargetError):
    """The command line is wrong (an option's value the CLI checks itself, options that do not go together):
    exit 2, as click exits for the usage errors it finds, with the same one ``error:`` line."""


USAGE_EXIT = 2


def usage_exit(lines: list[str]) -> typer.Exit:
    """Print each problem with the command line as ``error: ...`` and return the exit-2 to raise."""
    for line in lines:
        typer.echo(f"error: {line}", err=True)
    return typer.Exit(USAGE_EXIT)


_ACCESS_DENIED = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}
)
_EXPIRED = frozenset({"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"})
_BAD_CREDENTIALS = frozenset(
    {
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "AuthFailure",
        "InvalidAccessKeyId",
    }
)
_CREDENTIALS_HINT = (
    "set AWS_PROFILE (and run `aws sso login` if it uses SSO) or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
    "or pass --profile; without an account, run `osprey local up`"
)


def _client_error(error: Any) -> str:
    response = getattr(error, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    message = str(response.get("Error", {}).get("Message", "")) or str(error)
    operation = getattr(error, "operation_name", None) or "the AWS call"
    if code in _ACCESS_DENIED:
        return (
            f"AWS denied {operation} ({code}): {message}; use a profile or role allowed to call it "
            "(docs/cli.md lists what each command needs)"
        )
    if code in _EXPIRED:
        return f"your AWS credentials have expired ({code}); refresh them (e.g. `aws sso login`) and retry"
    if code in _BAD_CREDENTIALS:
        return f"AWS rejected your credentials ({code}: {message}); {_CREDENTIALS_HINT}"
    if code == "ResourceNotFoundException":
        return f"{operation}: {message}; check --table and the region (--region or AWS_REGION)"
    return f"{operation} failed: {code}: {message}"


def describe_error(error: BaseException) -> str | None:
    """One line saying what to set for a user error or a missing setup; None for anything else (a bug)."""
    if isinstance(error, TargetError):
        return str(error)
    try:
        from botocore import exceptions as botocore_errors  # noqa: PLC0415 - only on the error path
    except ImportError:  # pragma: no cover - boto3 is a dependency of the CLI's AWS commands
        return None
    if isinstance(error, botocore_errors.NoRegionError):
        return (
            "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION), pass --region, or give your profile a region "
            "(`aws configure set region us-east-1`)"
        )
    if isinstance(error, botocore_errors.NoCredentialsError):
        return f"no AWS credentials found: {_CREDENTIALS_HINT}"
    if isinstance(error, botocore_errors.PartialCredentialsError):
        return f"incomplete AWS credentials ({error}): set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    if isinstance(error, botocore_errors.ProfileNotFound):
        return f"{error}: pick one of `aws configure list-profiles` with --profile or AWS_PROFILE"
    if isinstance(
        error,
        botocore_errors.SSOError
        | botocore_errors.TokenRetrievalError
        | botocore_errors.CredentialRetrievalError,
    ):
        return f"cannot get AWS credentials ({error}); run `aws sso login` or fix the profile's credential source"
    if isinstance(error, botocore_errors.EndpointConnectionError | botocore_errors.ConnectTimeoutError):
        url = getattr(error, "kwargs", {}).get("endpoint_url", "the AWS endpoint")
        return (
            f"cannot reach {url}: check the network and the region (AWS_REGION), AWS_ENDPOINT_URL, or, for "
            "osprey local, that it is up (`osprey local status`)"
        )
    if isinstance(error, botocore_errors.ReadTimeoutError | botocore_errors.ConnectionClosedError):
        return f"the AWS endpoint did not answer ({error}); retry, or check AWS_ENDPOINT_URL and the network"
    if isinstance(error, botocore_errors.ParamValidationError):
        return f"invalid request: {error}"
    if isinstance(error, botocore_errors.ClientError):
        return _client_error(error)
    return None


@contextmanager
def guarded() -> Iterator[None]:
    """Turn a user error or missing setup raised inside into ``error: <one line>`` on stderr and exit 1."""
    try:
        yield
    except Exception as error:
        if os.environ.get(DEBUG_VARIABLE):
            raise
        message = describe_error(error)
        if message is None:
            raise
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(USAGE_EXIT if isinstance(error, UsageError) else 1) from None
