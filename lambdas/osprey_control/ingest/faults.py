"""AWS refusals that are the deployment's fault, not the event's: they go to the dead-letter queue, never to the
drop counter.

A dropped event is gone for good (it is reported to SQS as processed), which is right for an event that no
retry can make valid and wrong for a good event that met a broken deployment: a role without a permission, a
table or state machine that is not there, an item DynamoDB refuses as too large. Those raise
:class:`InfrastructureError`; the handler reports the record as a batch item failure, SQS redelivers it up to
the queue's ``maxReceiveCount`` (so a permission fixed in the meantime lets it through) and then keeps it in
the dead-letter queue, whose alarm asks for a look (docs/operations.md, "Events in the dead-letter queue").

=======================================================  ==================  ==================================
AWS error                                                 where               why it is the deployment's fault
=======================================================  ==================  ==================================
``AccessDenied*``, ``UnauthorizedOperation``,             any call            the role lacks a permission; the
``KMSAccessDeniedException`` and the other KMS refusals,                      event is fine
expired or unrecognised credentials
``ResourceNotFoundException``,                            Osprey's own        the registry table or the gang
``StateMachineDoesNotExist``                              resources (the      state machine is missing; a lookup
                                                          registry, the gang  of a job that no longer exists is
                                                          starter)            the event's (it stays ``rejected``)
``ValidationException`` "Item size has exceeded"          the registry        ingest's bounds should make it
(also as a transaction's cancellation reason)                                 impossible: a bound is missing
=======================================================  ==================  ==================================
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from osprey_control.errors import PermanentError, aws_error_code, classified

__all__ = ["InfrastructureError", "deployment_call", "infrastructure_fault"]

# Refusals of the caller itself, whatever resource the call named.
_DENIED = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "UnauthorizedException",
        "KMSAccessDeniedException",
        "KMSDisabledException",
        "KMSInvalidStateException",
        "KMSNotFoundException",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredTokenException",
    }
)
# Osprey's own resources missing: only a fault where the call names one of them.
_MISSING = frozenset({"ResourceNotFoundException", "StateMachineDoesNotExist"})
ITEM_TOO_LARGE = "Item size has exceeded"


class InfrastructureError(Exception):
    """A good event that the deployment could not record: it must reach the dead-letter queue, not be dropped.
    Neither a PermanentError (it would be dropped) nor a TransientError (it is not worth a silent retry)."""


def _too_large(response: dict[str, Any]) -> bool:
    message = str(response.get("Error", {}).get("Message", ""))
    reasons = response.get("CancellationReasons") or []
    return ITEM_TOO_LARGE in message or any(
        ITEM_TOO_LARGE in str(reason.get("Message", "")) for reason in reasons if isinstance(reason, dict)
    )


def infrastructure_fault(error: BaseException, *, own_resource: bool) -> InfrastructureError | None:
    """The fault ``error`` (a classified PermanentError, or the AWS error itself) is, if the deployment's;
    ``own_resource``: the call named Osprey's own table or state machine, not the event's job."""
    cause = error.__cause__ if isinstance(error, PermanentError) and error.__cause__ is not None else error
    code = aws_error_code(cause)
    response = getattr(cause, "response", None)
    response = response if isinstance(response, dict) else {}
    if code in _DENIED:
        why = "the function's role is refused (a missing permission, key policy or credentials)"
    elif own_resource and code in _MISSING:
        why = "Osprey's own table or state machine is not there (a deployment in progress or a wrong name)"
    elif own_resource and _too_large(response):
        why = "the registry refused the job's item as too large (ingest's bounds missed a field)"
    else:
        return None
    return InfrastructureError(
        f"{why}: {type(cause).__name__}: {str(cause)[:500]}. Not the event's fault: it is retried and then kept "
        "in the dead-letter queue (docs/operations.md, 'Events in the dead-letter queue')"
    )


@contextmanager
def deployment_call() -> Iterator[None]:
    """Wrap a call on Osprey's own resources (the registry, the gang starter): its AWS errors in the taxonomy
    (:func:`osprey_control.errors.classified`), and the deployment's faults as :class:`InfrastructureError`."""
    try:
        with classified():
            yield
    except PermanentError as error:
        fault = infrastructure_fault(error, own_resource=True)
        if fault is None:
            raise
        raise fault from error
